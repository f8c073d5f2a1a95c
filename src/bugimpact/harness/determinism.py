"""Fix the non-determinism factors of one run, feature-detecting every switch newer than 1.1."""
import os
import random

import numpy as np
import torch


def seed_everything(seed):
    random.seed(seed)
    np.random.seed(seed % (2 ** 32))
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)


def configure(threads, device, allow_tf32):
    """Set every switch this torch has; return what was actually set, for the run record."""
    flags = {}
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    flags["CUBLAS_WORKSPACE_CONFIG"] = os.environ["CUBLAS_WORKSPACE_CONFIG"]
    flags["PYTHONHASHSEED"] = os.environ.get("PYTHONHASHSEED")
    torch.set_num_threads(threads)
    if hasattr(torch, "set_num_interop_threads"):
        try:
            torch.set_num_interop_threads(1)
            flags["interop_threads"] = 1
        except RuntimeError:  # only settable before the first parallel work
            flags["interop_threads"] = None
    flags["threads"] = torch.get_num_threads()
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    flags["cudnn_deterministic"] = bool(torch.backends.cudnn.deterministic)
    flags["cudnn_benchmark"] = bool(torch.backends.cudnn.benchmark)
    flags["deterministic_algorithms"] = _deterministic_algorithms()
    cuda_backend = getattr(torch.backends, "cuda", None)
    matmul = getattr(cuda_backend, "matmul", None)
    if matmul is not None and hasattr(matmul, "allow_tf32"):
        matmul.allow_tf32 = allow_tf32
        flags["matmul_allow_tf32"] = bool(matmul.allow_tf32)
    if hasattr(torch.backends.cudnn, "allow_tf32"):
        torch.backends.cudnn.allow_tf32 = allow_tf32
        flags["cudnn_allow_tf32"] = bool(torch.backends.cudnn.allow_tf32)
    det = getattr(getattr(torch, "utils", None), "deterministic", None)
    if det is not None and hasattr(det, "fill_uninitialized_memory"):
        det.fill_uninitialized_memory = True
        flags["fill_uninitialized_memory"] = True
    flags["device"] = device
    return flags


def _deterministic_algorithms():
    """use_deterministic_algorithms (1.8; warn_only 1.11), else set_deterministic (1.7), else none.

    warn_only keeps a run alive on an op without a deterministic kernel; the harness records such
    warnings, and a run that had any is not treated as deterministic by the early decision.

    From torch 2.x, ``use_deterministic_algorithms`` also sets torch._inductor's flag, and importing
    torch._inductor (and torch._dynamo) costs about 2 s per run; the harness never compiles, so it
    sets the switch the kernels read, ``torch._C._set_deterministic_algorithms``, directly. (A user
    model that calls torch.compile is outside this guarantee.)
    """
    setter = getattr(torch._C, "_set_deterministic_algorithms", None)  # 1.8+
    if setter is not None:
        try:
            setter(True, warn_only=True)
            return "use_deterministic_algorithms(warn_only)"
        except TypeError:  # before 1.11
            setter(True)
            return "use_deterministic_algorithms"
    if hasattr(torch, "set_deterministic"):
        torch.set_deterministic(True)
        return "set_deterministic"
    return "unavailable"
