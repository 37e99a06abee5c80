"""horovod.torch's surface in threelc.torch: every name Horovod exports (but those the README
lists as missing), the build and run-time queries answered for threelc, the timeline
functions' refusal, and DistributedOptimizer's ``_parameter_names`` and naming errors (Horovod's
test_optimizer_no_named_parameters, test_duplicate_names, test_missing_named_parameters)."""

from __future__ import annotations

import ctypes
import itertools
from pathlib import Path

import pytest
import torch

import threelc
import threelc.torch as hvd
from threelc import _library

# Everything horovod.torch exports; threelc.torch has each of them but the ones below.
HOROVOD_TORCH = """
    Compression allgather_object broadcast_object broadcast_optimizer_state broadcast_parameters
    allreduce allreduce_async allreduce_ allreduce_async_ grouped_allreduce
    grouped_allreduce_async grouped_allreduce_ grouped_allreduce_async_ sparse_allreduce_async
    allgather allgather_async grouped_allgather grouped_allgather_async broadcast
    broadcast_async broadcast_ broadcast_async_ alltoall alltoall_async reducescatter
    reducescatter_async grouped_reducescatter grouped_reducescatter_async join barrier poll
    synchronize init shutdown is_initialized start_timeline stop_timeline size local_size
    cross_size rank local_rank cross_rank mpi_threads_supported mpi_enabled mpi_built
    gloo_enabled gloo_built nccl_built ddl_built ccl_built cuda_built rocm_built is_homogeneous
    ProcessSet global_process_set add_process_set remove_process_set Average Sum Adasum Min Max
    Product HorovodInternalError DistributedOptimizer SyncBatchNorm elastic
""".split()
MISSING = {"SyncBatchNorm", "elastic"}  # (Adasum exists by name; every use is refused)


def test_every_horovod_name_is_there():
    absent = [n for n in HOROVOD_TORCH if not hasattr(hvd, n) and n not in MISSING]
    present_but_listed = [n for n in MISSING if hasattr(hvd, n)]
    assert not absent, f"threelc.torch lacks horovod.torch's {absent}"
    assert not present_but_listed, f"{present_but_listed} exist: take them off MISSING"
    for name in hvd.__all__:
        assert hasattr(hvd, name), f"threelc.torch.__all__ names {name!r}, which is missing"
    assert hvd.HorovodInternalError is threelc.ThreelcError is hvd.ThreelcError
    assert issubclass(hvd.ThreelcError, RuntimeError)


def _cmake_cache() -> Path:
    """The CMakeCache.txt of the build the loaded library comes from (<build>/lib/..)."""
    return Path(_library.path).resolve().parent.parent / "CMakeCache.txt"


def _nccl_loads() -> int:
    try:
        lib = ctypes.CDLL(threelc.settings.value("THREELC_NCCL_LIBRARY") or "libnccl.so.2")
    except OSError:
        return 0
    version = ctypes.c_int(0)
    return int(version.value) if lib.ncclGetVersion(ctypes.byref(version)) == 0 else 0


def test_build_queries_answer_for_threelc():
    assert hvd.mpi_built() is False and hvd.gloo_built() is False
    assert hvd.ddl_built() is False and hvd.ccl_built() is False
    assert hvd.rocm_built() is False
    assert hvd.mpi_enabled() is False and hvd.gloo_enabled() is False
    # Horovod raises where MPI is not enabled; threelc never uses MPI
    with pytest.raises(ValueError, match="MPI"):
        hvd.mpi_threads_supported()
    # True exactly in a build with nvcc (the engine's C ABI says which this library is)
    assert hvd.cuda_built() is bool(threelc.engine._fn("threelc_cuda_built")())
    nccl = hvd.nccl_built()
    assert isinstance(nccl, int) and nccl >= 0
    if not hvd.cuda_built():
        assert nccl == 0, "NCCL reported in a build without CUDA"
    if nccl == 0:  # the engine says why not
        assert "NCCL" in threelc.engine.last_error(), threelc.engine.last_error()
    cache = _cmake_cache()
    if cache.is_file():  # a build tree: CMake says whether it found nccl.h
        text = cache.read_text(errors="replace")
        found = "THREELC_NCCL_INCLUDE_DIR:PATH=" in text and \
            "THREELC_NCCL_INCLUDE_DIR-NOTFOUND" not in text
        expected = _nccl_loads() if found and hvd.cuda_built() else 0
        assert nccl == expected, f"nccl_built() {nccl}, expected {expected} (nccl.h found: " \
                                 f"{found}, per {cache})"


def test_is_homogeneous_agrees_with_every_ranks_local_size():
    sizes = hvd.allgather_object(hvd.local_size(), name="local sizes")
    assert hvd.is_homogeneous() is (len(set(sizes)) == 1)
    assert hvd.is_homogeneous()  # threelcrun starts every rank on this host


def test_timeline_cannot_be_started_or_stopped_at_run_time(tmp_path):
    with pytest.raises(ValueError, match="THREELC_TIMELINE"):
        hvd.start_timeline(str(tmp_path / "timeline.json"), mark_cycles=True)
    with pytest.raises(ValueError, match="THREELC_TIMELINE"):
        hvd.stop_timeline()
    assert not (tmp_path / "timeline.json").exists()


# --------------------------------------------------- DistributedOptimizer's parameter names

def two_group_model():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(10, 10), torch.nn.Linear(10, 10))
    groups = [{"params": model[0].parameters()}, {"params": model[1].parameters()}]
    return model, torch.optim.SGD(groups, lr=0.001)


def test_parameter_names_without_named_parameters(names):
    model, opt = two_group_model()
    opt = hvd.DistributedOptimizer(opt, compression=hvd.Compression.none)
    got = opt._parameter_names
    everyone = hvd.allgather_object(sorted(got.values()), name=names("names"))
    x = torch.ones(2, 10)
    opt.zero_grad()
    model(x).sum().backward()
    opt.step()  # the gradients travel under these names on every rank
    assert got == {model[0].weight: "allreduce.noname.0.0", model[0].bias: "allreduce.noname.0.1",
                   model[1].weight: "allreduce.noname.1.0", model[1].bias: "allreduce.noname.1.1"}
    assert all(e == everyone[0] for e in everyone)


def test_parameter_names_with_named_parameters():
    model, opt = two_group_model()
    opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters())
    assert opt._parameter_names == {p: n for n, p in model.named_parameters()}


def test_duplicate_names_are_refused():
    net1, net2 = torch.nn.Conv2d(1, 1, 1), torch.nn.Conv2d(1, 1, 1)
    opt = torch.optim.SGD(itertools.chain(net1.parameters(), net2.parameters()), lr=0.1)
    named = itertools.chain(net1.named_parameters(), net2.named_parameters())
    with pytest.raises(ValueError, match="unique.*bias, weight"):
        hvd.DistributedOptimizer(opt, named_parameters=named)


def test_missing_named_parameters_are_refused():
    model, opt = two_group_model()
    with pytest.raises(ValueError, match="3 model parameter.s. were not named"):
        hvd.DistributedOptimizer(opt, named_parameters=list(model.named_parameters())[:1])
