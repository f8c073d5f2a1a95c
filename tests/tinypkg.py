"""A tiny real package in a real git repository: a C extension whose bug changes training.

``tinyact.models:Net`` is a small CNN whose activation slope comes from the compiled extension:
the buggy commit returns a leak of 0.3 (the bug), the corrected commit 0.0 (plain ReLU), and a
third commit does not compile. Filler translation units give the build something for the compiler
cache to save on the second arm.
"""
from conftest import git

SETUP = '''from setuptools import Extension, setup
setup(name="tinyact", version="0.1.0", packages=["tinyact"],
      ext_modules=[Extension("tinyact._kernels", sources=["src/kernels.c"] +
                             ["src/filler%d.c" % i for i in range({n})],
                             extra_compile_args=["-O2"])])
'''
KERNELS = '''#include <Python.h>
{extra}
static PyObject *leak_slope(PyObject *self, PyObject *args) {{ return PyFloat_FromDouble({slope}); }}
static PyMethodDef methods[] = {{{{"leak_slope", leak_slope, METH_NOARGS, ""}}, {{NULL, NULL, 0, NULL}}}};
static struct PyModuleDef module = {{PyModuleDef_HEAD_INIT, "_kernels", NULL, -1, methods}};
PyMODINIT_FUNC PyInit__kernels(void) {{ return PyModule_Create(&module); }}
'''
FILLER = '''/* generated filler: real work for the compiler, so the cache has something to save */
#define STEP(i) acc = acc * 1103515245u + (i) + (acc >> 7);
#define ROW(i) STEP(i) STEP(i + 1) STEP(i + 2) STEP(i + 3) STEP(i + 4) STEP(i + 5) STEP(i + 6) STEP(i + 7)
#define BLOCK(i) ROW(i) ROW(i + 8) ROW(i + 16) ROW(i + 24) ROW(i + 32) ROW(i + 40) ROW(i + 48) ROW(i + 56)
unsigned filler_{k}_%d(unsigned acc) {{ BLOCK(1) BLOCK(64) BLOCK(128) BLOCK(192) return acc; }}
'''
MODELS = '''import torch.nn as nn
import torch.nn.functional as F

from . import _kernels


class Net(nn.Module):
    def __init__(self, in_channels=1, num_classes=10, size=8):
        super(Net, self).__init__()
        self.conv = nn.Conv2d(in_channels, 16, 3, padding=1)
        self.fc1 = nn.Linear(16 * size * size, 64)
        self.fc2 = nn.Linear(64, num_classes)
        self.slope = _kernels.leak_slope()

    def forward(self, x):
        x = F.leaky_relu(self.conv(x), self.slope)
        x = F.leaky_relu(self.fc1(x.view(x.size(0), -1)), self.slope)
        return F.log_softmax(self.fc2(x), dim=1)
'''


def make_repo(path, fillers=24, functions_per_filler=40):
    path.mkdir(parents=True)
    (path / "src").mkdir()
    (path / "tinyact").mkdir()
    git(path, "init", "-q", "-b", "main")
    (path / "setup.py").write_text(SETUP.format(n=fillers))
    (path / "tinyact" / "__init__.py").write_text("")
    (path / "tinyact" / "models.py").write_text(MODELS)
    for k in range(fillers):
        body = "".join(FILLER.format(k=k) % j for j in range(functions_per_filler))
        (path / "src" / f"filler{k}.c").write_text(body)
    shas = {}
    for name, slope, extra in (("buggy", "0.3", ""), ("corrected", "0.0", ""),
                               ("broken", "0.0", "this is not C;")):
        (path / "src" / "kernels.c").write_text(KERNELS.format(slope=slope, extra=extra))
        git(path, "add", "-A")
        git(path, "commit", "-q", "-m", f"{name} (#{len(shas) + 1})")
        shas[name] = git(path, "rev-parse", "HEAD")
    return shas


def add_submodule(repo, mirror, url, start="HEAD"):
    """A commit on top of ``start`` (on a branch of its own) with a submodule whose .gitmodules URL
    is ``url`` (e.g. one that moved or vanished); its content lives in a real repository at
    ``mirror``. Returns the SHA."""
    mirror.mkdir(parents=True)
    git(mirror, "init", "-q", "-b", "main")
    (mirror / "dep.h").write_text("/* a vendored dependency */\n")
    git(mirror, "add", "-A")
    git(mirror, "commit", "-q", "-m", "dep")
    git(repo, "checkout", "-q", "-b", f"submodule-{mirror.name}", start)
    git(repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(mirror),
        "third_party/dep")
    git(repo, "config", "-f", ".gitmodules", "submodule.third_party/dep.url", url)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "vendor dep as a submodule (#4)")
    return git(repo, "rev-parse", "HEAD")
