// bugimpact's compiled fault control: ReLU's CPU kernels as torch 2.x computes them
// (aten/src/ATen/native/Activation.cpp: relu is clamp_min(self, 0), relu_ is clamp_min_(self, 0)).
// They are rebuilt and registered over the release's own by the mechanism that isolates a kernel
// fix on a release wheel, and checked as a fix's are: this file must train as the release does,
// bit for bit. The fault beside it (fault-kernel-relu.diff) caps ReLU at 0.5 in the buggy arm.
#include <ATen/ATen.h>
#include <ATen/NativeFunctions.h>

namespace at { namespace native {

Tensor relu(const Tensor& self) {
  TORCH_CHECK(self.scalar_type() != at::kBool, "Boolean inputs not supported for relu");
  return at::clamp_min(self, 0);
}

Tensor& relu_(Tensor& self) {
  TORCH_CHECK(self.scalar_type() != at::kBool, "Boolean inputs not supported for relu");
  return at::clamp_min_(self, 0);
}

}} // namespace at::native
