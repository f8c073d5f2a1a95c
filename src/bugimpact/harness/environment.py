"""The environment as seen from inside the run (never from the host that launched it)."""
import os
import platform
import subprocess
import sys

import numpy as np
import torch


def _cpu_model():
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except (IOError, OSError):
        pass
    return platform.processor() or None


def _driver():
    try:
        out = subprocess.check_output(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            stderr=subprocess.STDOUT, timeout=10)
        return out.decode("utf-8", "replace").strip().splitlines()[0]
    except Exception:  # no driver, no GPU, or no nvidia-smi: not an error for a CPU run
        return None


def describe(device, flags, data_sha256, harness_version):
    cudnn = None
    if hasattr(torch.backends, "cudnn") and torch.backends.cudnn.is_available():
        cudnn = torch.backends.cudnn.version()
    on_cuda = device == "cuda" and torch.cuda.is_available()
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "numpy": np.__version__,
        "torch": torch.__version__,
        # a torchvision model's library, once it is built (None: none was imported)
        "torchvision": getattr(sys.modules.get("torchvision"), "__version__", None),
        "torch_git_version": getattr(torch.version, "git_version", None),
        "cuda": getattr(torch.version, "cuda", None),
        "cudnn": cudnn,
        "device": device,
        "device_name": torch.cuda.get_device_name(0) if on_cuda else None,
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "driver": _driver() if on_cuda else None,
        "cpu_model": _cpu_model(),
        "threads": torch.get_num_threads(),
        "nice": os.nice(0),  # the process's priority (a runtime kind may lower it)
        "determinism": flags,
        "dataset_sha256": data_sha256,
        "harness_version": harness_version,
    }
