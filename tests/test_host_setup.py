"""bin/setup-host's torch: the build it takes on this machine, and what it says before installing
(asked of real pip, over a local index of real wheels)."""
import os
import platform
import sys

from conftest import make_wheel

from bugimpact import torch_install


def test_the_build_follows_the_machine():
    requirement, args, why = torch_install.choose("2.13.0", 1, None)
    # exactly PyPI's version: a local +cpu wheel (find-links) would otherwise win as the higher one
    assert requirement == "torch===2.13.0" and args == [] and "CUDA build" in why
    requirement, args, why = torch_install.choose("2.13.0", 0, "https://cpu.example/whl")
    assert requirement == "torch==2.13.0" and args == ["--extra-index-url", "https://cpu.example/whl"]
    assert "the CPU build from https://cpu.example/whl" in why
    requirement, args, why = torch_install.choose("2.13.0", 0, None)
    assert args == [] and "does not answer" in why and "CUDA build runs on the CPU too" in why


def test_what_pip_would_install_is_said_with_its_build_and_size(tmp_path):
    cpu, cuda = tmp_path / "cpu", tmp_path / "cuda"
    cpu.mkdir()
    cuda.mkdir()
    make_wheel(cpu, "torch", {"torch/__init__.py": "x = 1\n" * 1000}, version="9.1.0+cpu")
    make_wheel(cuda, "torch", {"torch/__init__.py": ""}, version="9.1.0",
               requires=["nvidia-cuda-runtime==13.0.96", "nvidia-cublas"])
    make_wheel(cuda, "nvidia_cuda_runtime", {"nvidia/rt.py": "y = 2\n" * 5000}, version="13.0.96")
    make_wheel(cuda, "nvidia_cublas", {"nvidia/blas.py": ""}, version="13.1.1")
    env = dict(os.environ, PIP_CONFIG_FILE=os.devnull, PIP_NO_INDEX="1", PIP_FIND_LINKS="",
               PIP_CONSTRAINT="")
    for folder, build, count in ((cpu, "CPU build", 1), (cuda, "CUDA 13.0 build", 3)):
        # --ignore-installed: as in a new environment, whatever this one has (a CUDA torch's
        # libraries, on another Python's CI run)
        items = torch_install.planned(sys.executable, "torch==9.1.0",
                                      ["--no-index", "--ignore-installed", "--find-links", str(folder)], env)
        sizes = [torch_install.size_of(item["url"]) for item in items]
        assert sizes == [os.path.getsize(next(folder.glob(f"{i['name'].replace('-', '_')}-*.whl")))
                         for i in items]
        text = torch_install.describe(items, sizes)
        assert text.startswith(f"torch 9.1.0{'+cpu' if folder == cpu else ''} ({build}, {count} package")
        assert text.endswith(f"{torch_install._mb(sum(sizes))} to download)")


def test_the_build_is_torchs_own_even_when_its_libraries_are_there_already():
    """A CUDA torch whose NVIDIA libraries are installed already (a GPU image) is still said to
    be the CUDA build: the build is read from torch's version and requirements."""
    torch = {"name": "torch", "version": "2.13.0", "url": "",  # torch 2.13.0's own requirements
             "requires": ["filelock", 'cuda-toolkit[cublas,cudart,cufft]==13.0.3; platform_system == "Linux"',
                          'nvidia-cudnn-cu13==9.20.0.48; platform_system == "Linux"',
                          'pyyaml; extra == "pyyaml"']}
    expected = "CUDA 13.0 build" if platform.system() == "Linux" else "CPU build"
    assert torch_install.describe([torch], [2_000_000_000]) == \
        f"torch 2.13.0 ({expected}, 1 package, 2.0 GB to download)"
    older = dict(torch, requires=["nvidia-cuda-runtime-cu12==12.1.105; platform_system == 'Linux'"])
    assert torch_install.describe([older], [None]).startswith(f"torch 2.13.0 ({expected.replace('13.0', '12.1')},")
    local = dict(torch, version="2.5.1+cu121", requires=["filelock"])
    assert torch_install.describe([local], [None]).startswith("torch 2.5.1+cu121 (CUDA 12.1 build,")
    cpu = dict(torch, version="2.13.0+cpu", requires=["filelock", "sympy"])
    assert torch_install.describe([cpu], [None]) == "torch 2.13.0+cpu (CPU build, 1 package, size unknown)"
