"""The engine's lifecycle (init, shutdown) and what it says about the job and the build:
rank, size and their local and cross-host forms, CUDA support, the library's version."""

from __future__ import annotations

from .abi import _check, _fn, _text, last_error
from .handles import _reap_orphans

__all__ = [
    "init", "shutdown", "is_initialized", "cuda_built", "cuda_unavailable_reason",
    "nccl_version", "rank",
    "size", "local_rank", "local_size", "cross_rank", "cross_size", "is_homogeneous", "version",
]


def version() -> str:
    return _text(_fn("threelc_version")())


def init() -> None:
    """Joins the job described by the environment (threelcrun, mpirun, srun, torchrun).

    Raises ThreelcError naming the variable for a malformed THREELC_* value, or naming the
    ranks that never arrived. A no-op while initialized; after shutdown() it joins anew.
    """
    _check(_fn("threelc_init")(), "threelc_init")


def shutdown() -> None:
    """Stops the engine: operations still pending fail with ESHUTDOWN. No-op when not
    initialized."""
    try:
        _check(_fn("threelc_shutdown")(), "threelc_shutdown")
    finally:
        _reap_orphans()


def is_initialized() -> bool:
    return bool(_fn("threelc_is_initialized")())


def cuda_built() -> bool:
    """Whether libthreelc.so was built with CUDA (the CUDA 3LC codec, device allreduce)."""
    return bool(_fn("threelc_cuda_built")())


def cuda_unavailable_reason() -> str:
    """"" when allreduce takes CUDA tensors in this process (:func:`allreduce_device`);
    otherwise why not (no CUDA in the build, no device visible)."""
    if _fn("threelc_cuda_available")():
        return ""
    return last_error() or "CUDA tensors are not available"


def nccl_version() -> int:
    """NCCL's version code (e.g. 21803) when uncompressed allreduces of CUDA tensors run over
    NCCL in this process (built with CUDA and nccl.h, THREELC_NCCL on, the library loads);
    0 otherwise (:func:`last_error` says why). ThreelcError for a malformed THREELC_* value."""
    version = int(_fn("threelc_nccl_version")())
    return _check(version, "threelc_nccl_version") if version < 0 else version


def rank() -> int:
    """This process's rank; -1 when not initialized."""
    return int(_fn("threelc_rank")())


def size() -> int:
    """The number of ranks; -1 when not initialized."""
    return int(_fn("threelc_size")())


def local_rank() -> int:
    """Rank among the ranks on this host; -1 when not initialized."""
    return int(_fn("threelc_local_rank")())


def local_size() -> int:
    """Number of ranks on this host; -1 when not initialized."""
    return int(_fn("threelc_local_size")())


def cross_rank() -> int:
    """This host's index among the hosts; -1 when not initialized."""
    return int(_fn("threelc_cross_rank")())


def cross_size() -> int:
    """Number of hosts; -1 when not initialized."""
    return int(_fn("threelc_cross_size")())


def is_homogeneous() -> int:
    """1 when every host runs the same number of ranks, else 0; -1 when not initialized."""
    return int(_fn("threelc_is_homogeneous")())
