// bugimpact: fbgemm is a submodule that no clone of pytorch holds; this declares what THBlas.cpp
// calls as torch 1.4.0's libtorch.so exports it (nm -D: fbgemm::cblas_gemm_i64_i64acc(
// fbgemm::matrix_op_t, fbgemm::matrix_op_t, int, int, int, long const*, int, long const*, int,
// bool, long*, int)), with fbgemm's own enumerators.
#pragma once
#include <cstdint>

namespace fbgemm {
enum class matrix_op_t { NoTranspose, Transpose };
void cblas_gemm_i64_i64acc(matrix_op_t transa, matrix_op_t transb, int M, int N, int K,
                           const std::int64_t* A, int lda, const std::int64_t* B, int ldb,
                           bool accumulate, std::int64_t* C, int ldc);
}  // namespace fbgemm
