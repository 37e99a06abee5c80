"""Horovod's build and run-time queries (``horovod.common.basics``), answered for threelc.

threelc is neither MPI, Gloo, oneCCL, DDL nor ROCm: those answer False (and
``mpi_threads_supported`` raises, as Horovod's does where MPI is not enabled). ``cuda_built``
is the engine's answer; ``nccl_built`` says whether allreduces of CUDA tensors can run over
NCCL here. ``is_homogeneous`` is the engine's (every host runs as many ranks, hosts as
``cross_size`` counts them). Horovod's
dynamic timeline does not exist: the engine writes one for the whole run when THREELC_TIMELINE
names a file before ``init()``, so ``start_timeline``/``stop_timeline`` refuse.
"""

from __future__ import annotations

from .. import engine as _engine

_NOT_INITIALIZED = "threelc has not been initialized; use hvd.init()."


def mpi_built() -> bool:
    """False: threelc does not use MPI (mpirun may still start its ranks)."""
    return False


def gloo_built() -> bool:
    return False


def ddl_built() -> bool:
    return False


def ccl_built() -> bool:
    return False


def rocm_built() -> bool:
    return False


def mpi_enabled() -> bool:
    return False


def gloo_enabled() -> bool:
    return False


def mpi_threads_supported() -> bool:
    """Raises ValueError, as Horovod does where MPI is not enabled: threelc never is."""
    raise ValueError("threelc does not use MPI, so there is no MPI threading support to "
                     "query (mpi_enabled() is False)")


def cuda_built() -> bool:
    """Whether libthreelc.so was built with CUDA (allreduce then takes CUDA tensors as device
    memory where a device is visible)."""
    return _engine.cuda_built()


def nccl_built() -> int:
    """As Horovod: NCCL's version code (e.g. 21803) when NCCL is usable here, else 0: this
    library was built with CUDA and nccl.h, THREELC_NCCL is on, and the NCCL library it loads
    at run time (THREELC_NCCL_LIBRARY, else libnccl.so.2) loads; the version is that
    library's (the engine's ``threelc_nccl_version``)."""
    return _engine.nccl_version()


def is_homogeneous() -> bool:
    """True when every host runs the same number of ranks (ValueError before ``init()``)."""
    homogeneous = _engine.is_homogeneous()
    if homogeneous < 0:
        raise ValueError(_NOT_INITIALIZED)
    return homogeneous == 1


def start_timeline(file_path, mark_cycles: bool = False) -> None:
    """Refuses (ValueError, as Horovod does without HOROVOD_TIMELINE=DYNAMIC): threelc's
    timeline cannot be started at run time."""
    if not _engine.is_initialized():
        raise ValueError(_NOT_INITIALIZED)
    raise ValueError("threelc cannot start a timeline at run time: set THREELC_TIMELINE to a "
                     "file path before init() to record the whole run (docs/CONFIGURATION.md)")


def stop_timeline() -> None:
    """Refuses, as start_timeline does (the run's timeline closes at shutdown())."""
    if not _engine.is_initialized():
        raise ValueError(_NOT_INITIALIZED)
    raise ValueError("threelc cannot stop its timeline at run time: the timeline that "
                     "THREELC_TIMELINE names is closed by shutdown()")
