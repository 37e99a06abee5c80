"""Errors. Arguments refused before anything is submitted (TypeError, ValueError, ...: the
same on every rank; the engine's refusals of arguments are InvalidArgumentError, a ValueError
as in Horovod); a shape, dtype, op or root mismatch across ranks under one name
(ThreelcError EMISMATCH on every rank, naming the tensor); a name mismatch (rank-dependent
names: EMISMATCH after THREELC_STALL_TIMEOUT on every rank, naming both names). After each
error the next operation works, also under the failed name."""

from __future__ import annotations

import os
import time

import pytest
import torch

import threelc.torch as hvd
from threelc import engine
from support.torch_helpers import assert_same, catch, expect_raises, rank, size


def check_next_operation_works(name):
    out = hvd.allreduce(torch.ones(3), name=name, op=hvd.Sum)
    assert_same(out, torch.full((3,), float(size())), f"allreduce {name!r} after an error")


# -------------------------------------------------------------- refused before submission

LOCAL_ERRORS = {
    "allreduce-bool": (TypeError, lambda: hvd.allreduce(torch.ones(3, dtype=torch.bool))),
    "allreduce_-bool": (TypeError, lambda: hvd.allreduce_(torch.ones(3, dtype=torch.bool))),
    "allreduce_async-bool": (TypeError,
                             lambda: hvd.allreduce_async(torch.ones(3, dtype=torch.bool))),
    "allreduce_async_-bool": (TypeError,
                              lambda: hvd.allreduce_async_(torch.ones(3, dtype=torch.bool))),
    "grouped_allreduce-bool": (TypeError, lambda: hvd.grouped_allreduce(
        [torch.ones(2), torch.ones(3, dtype=torch.bool)])),
    "reducescatter-bool": (TypeError,
                           lambda: hvd.reducescatter(torch.ones(4, dtype=torch.bool))),
    "push_pull-bool": (TypeError, lambda: hvd.push_pull(torch.ones(3, dtype=torch.bool))),
    "allreduce-complex": (TypeError,
                          lambda: hvd.allreduce(torch.ones(3, dtype=torch.complex64))),
    "allreduce_-complex": (TypeError,
                           lambda: hvd.allreduce_(torch.ones(3, dtype=torch.complex64))),
    "grouped_allreduce_-complex": (TypeError, lambda: hvd.grouped_allreduce_(
        [torch.ones(3, dtype=torch.complex64)])),
    "allgather-complex": (TypeError,
                          lambda: hvd.allgather(torch.ones(3, dtype=torch.complex64))),
    "broadcast-complex": (TypeError,
                          lambda: hvd.broadcast(torch.ones(3, dtype=torch.complex64), 0)),
    "broadcast_-complex": (TypeError,
                           lambda: hvd.broadcast_(torch.ones(3, dtype=torch.complex64), 0)),
    "alltoall-complex": (TypeError, lambda: hvd.alltoall(
        torch.ones(2 * size(), dtype=torch.complex64))),
    "reducescatter-complex": (TypeError,
                              lambda: hvd.reducescatter(torch.ones(4, dtype=torch.complex64))),
    "allreduce-sparse": (TypeError, lambda: hvd.allreduce(torch.ones(3).to_sparse())),
    "allreduce-not-a-tensor": (TypeError, lambda: hvd.allreduce([1.0, 2.0])),
    "broadcast-not-a-tensor": (TypeError, lambda: hvd.broadcast(3, 0)),
    "allreduce-bad-op": (ValueError, lambda: hvd.allreduce(torch.ones(3), op=7)),
    "allreduce-bad-compression": (TypeError,
                                  lambda: hvd.allreduce(torch.ones(3), compression="fp16")),
    "allreduce-nul-in-name": (ValueError, lambda: hvd.allreduce(torch.ones(3), name="a\0b")),
    "allreduce-name-not-str": (TypeError, lambda: hvd.allreduce(torch.ones(3), name=5)),
    "allreduce-9-dims": (ValueError, lambda: hvd.allreduce(torch.ones([1] * 9))),
    "allreduce-infinite-prescale": (hvd.InvalidArgumentError, lambda: hvd.allreduce(
        torch.ones(3), prescale_factor=float("inf"))),
    "reducescatter-bad-op": (ValueError, lambda: hvd.reducescatter(torch.ones(4), op=7)),
    # Horovod's Adasum exists by name; threelc has no such reduction
    "allreduce-adasum": (NotImplementedError,
                         lambda: hvd.allreduce(torch.ones(3), op=hvd.Adasum)),
    "grouped_allreduce-adasum": (NotImplementedError,
                                 lambda: hvd.grouped_allreduce([torch.ones(3)], op=hvd.Adasum)),
    "reducescatter-adasum": (NotImplementedError,
                             lambda: hvd.reducescatter(torch.ones(4), op=hvd.Adasum)),
    "grouped_reducescatter-adasum": (NotImplementedError, lambda: hvd.grouped_reducescatter(
        [torch.ones(4)], op=hvd.Adasum)),
    "optimizer-adasum": (NotImplementedError, lambda: hvd.DistributedOptimizer(
        torch.optim.SGD([torch.nn.Parameter(torch.ones(2))], lr=0.1), op=hvd.Adasum)),
    "broadcast-root-too-large": (hvd.InvalidArgumentError, lambda: hvd.broadcast(torch.ones(2), size())),
    "broadcast_-root-negative": (hvd.InvalidArgumentError, lambda: hvd.broadcast_(torch.ones(2), -1)),
    "allgather-0d": (ValueError, lambda: hvd.allgather(torch.tensor(1.0))),
    "alltoall-0d": (ValueError, lambda: hvd.alltoall(torch.tensor(1.0))),
    "reducescatter-0d": (ValueError, lambda: hvd.reducescatter(torch.tensor(1.0))),
    "grouped_allreduce-empty": (ValueError, lambda: hvd.grouped_allreduce([])),
    "grouped_allreduce_async-empty": (ValueError, lambda: hvd.grouped_allreduce_async([])),
    "allreduce-process-set": (TypeError,
                              lambda: hvd.allreduce(torch.ones(3), process_set=object())),
    "process-set-not-added": (ValueError, lambda: hvd.allreduce(
        torch.ones(3), process_set=hvd.ProcessSet([0]))),
    "synchronize-not-a-handle": (TypeError, lambda: hvd.synchronize(None)),
    "alltoall-nsplits": (hvd.InvalidArgumentError, lambda: hvd.alltoall(
        torch.ones(size() + 1), splits=[1] * (size() + 1))),
    "alltoall-splits-sum": (hvd.InvalidArgumentError, lambda: hvd.alltoall(
        torch.ones(5), splits=[1] * size())),
    "alltoall-indivisible": (hvd.InvalidArgumentError, lambda: hvd.alltoall(
        torch.ones(size() + 1)) if size() > 1 else hvd.alltoall(torch.ones(1), splits=[-1])),
    "alltoall-negative-split": (hvd.InvalidArgumentError, lambda: hvd.alltoall(
        torch.ones(1), splits=[2] + [0] * (size() - 2) + [-1])),
    "alltoall-float-splits": (ValueError, lambda: hvd.alltoall(
        torch.ones(size()), splits=torch.ones(size(), dtype=torch.float32))),
    "alltoall-float-split-list": (ValueError, lambda: hvd.alltoall(
        torch.ones(size()), splits=[1.0] * size())),
}


# A refused dtype is named in the message: case suffix -> the dtype's name.
REFUSED_DTYPES = {"bool": "torch.bool", "complex": "torch.complex64"}


@pytest.mark.parametrize("case", sorted(LOCAL_ERRORS))
def test_refused_locally(case, names):
    """Raised at the call on every rank alike; nothing is left pending and the next
    operation (an unnamed one, so the unnamed counters still agree) works."""
    exc_type, call = LOCAL_ERRORS[case]
    e = expect_raises(exc_type, call)
    dtype = REFUSED_DTYPES.get(case.rsplit("-", 1)[-1])
    assert dtype is None or dtype in str(e), f"the message does not name {dtype}: {e}"
    out = hvd.allreduce(torch.ones(2), op=hvd.Sum)
    if exc_type is hvd.InvalidArgumentError:  # the engine's EINVAL: a ValueError too, as
        assert e.code == engine.EINVAL, e       # Horovod raises for bad arguments
        assert isinstance(e, ValueError) and isinstance(e, hvd.ThreelcError), type(e)
    assert_same(out, torch.full((2,), float(size())), "unnamed allreduce after the error")


# ------------------------------------------------------------------ mismatches across ranks

def _shape(ok, base=4):
    """base, but base + 1 on the last rank unless `ok`."""
    return (base,) if ok or rank() != size() - 1 else (base + 1,)


def _dtype(ok, a=torch.float32, b=torch.float64):
    return a if ok or rank() != 0 else b


def _big(ok):
    """A tensor that 3LC compresses (>= THREELC_MIN_COMPRESS_BYTES), one row longer on the
    last rank unless `ok`."""
    return torch.ones((64, 257 + (0 if ok or rank() != size() - 1 else 1)))


# case -> (call(name, ok), name the message must contain given the call's name)
MISMATCHES = {
    "allreduce-shape": lambda nm, ok: hvd.allreduce(torch.ones(_shape(ok)), name=nm),
    "allreduce-dtype": lambda nm, ok: hvd.allreduce(torch.ones(4, dtype=_dtype(ok)), name=nm),
    "allreduce-op": lambda nm, ok: hvd.allreduce(
        torch.ones(4), name=nm, op=hvd.Sum if ok or rank() != 0 else hvd.Max),
    "allreduce_-shape": lambda nm, ok: hvd.allreduce_(torch.ones(_shape(ok)), name=nm),
    "allreduce_async-dtype": lambda nm, ok: hvd.synchronize(hvd.allreduce_async(
        torch.ones(4, dtype=_dtype(ok, torch.int32, torch.int64)), name=nm)),
    "allreduce_async_-shape": lambda nm, ok: hvd.synchronize(hvd.allreduce_async_(
        torch.ones(_shape(ok, 7)), name=nm)),
    "allreduce-threelc-shape": lambda nm, ok: hvd.allreduce(
        _big(ok), name=nm, compression=hvd.Compression.threelc),
    "push_pull-dtype": lambda nm, ok: hvd.push_pull(
        torch.ones(4, dtype=_dtype(ok, torch.float16, torch.bfloat16)), name=nm),
    "grouped_allreduce-shape": lambda nm, ok: hvd.grouped_allreduce(
        [torch.ones(2), torch.ones(_shape(ok))], name=nm),
    "grouped_allreduce_async_-dtype": lambda nm, ok: hvd.synchronize(
        hvd.grouped_allreduce_async_([torch.ones(3, dtype=_dtype(ok)), torch.ones(2)], name=nm)),
    "allgather-trailing": lambda nm, ok: hvd.allgather(
        torch.ones((rank() + 1,) + _shape(ok, 3)), name=nm),
    "allgather-dtype": lambda nm, ok: hvd.allgather(
        torch.ones(2, dtype=_dtype(ok, torch.uint8, torch.int8)), name=nm),
    "broadcast-shape": lambda nm, ok: hvd.broadcast(torch.ones(_shape(ok)), 0, name=nm),
    "broadcast_-dtype": lambda nm, ok: hvd.broadcast_(
        torch.ones(4, dtype=_dtype(ok, torch.int8, torch.uint8)), 0, name=nm),
    "broadcast-root": lambda nm, ok: hvd.broadcast(
        torch.ones(4), 0 if ok or rank() != 0 else size() - 1, name=nm),
    "alltoall-trailing": lambda nm, ok: hvd.alltoall(
        torch.ones((2 * size(),) + _shape(ok, 2)), name=nm),
    "alltoall-dtype": lambda nm, ok: hvd.alltoall(
        torch.ones(2 * size(), dtype=_dtype(ok, torch.int64, torch.float64)), name=nm),
    "reducescatter-shape": lambda nm, ok: hvd.reducescatter(
        torch.ones(_shape(ok, 2 * size())), name=nm),
    "reducescatter-dtype": lambda nm, ok: hvd.reducescatter(
        torch.ones(2 * size(), dtype=_dtype(ok, torch.float16, torch.float32)), name=nm),
}
GROUPED = {"grouped_allreduce-shape": ".1", "grouped_allreduce_async_-dtype": ".0"}


@pytest.mark.parametrize("case", sorted(MISMATCHES))
def test_mismatch_across_ranks(case, names, multi_rank):
    """A rank-dependent shape, dtype, op or root under one name fails on every rank with
    EMISMATCH naming the tensor; the next operation works, and so does the same call under
    the same name once the ranks agree."""
    call = MISMATCHES[case]
    nm = names("t")
    tensor_name = nm + GROUPED.get(case, "")
    _, e = catch(call, nm, False)
    check_next_operation_works(names("next"))
    call(nm, True)  # the failed name, now consistent
    mine = (getattr(e, "code", None), tensor_name in str(e))
    everyone = hvd.allgather_object(mine, name=names("flags"))
    assert isinstance(e, hvd.ThreelcError), f"expected ThreelcError, got {e!r}"
    assert e.code == engine.EMISMATCH, f"{e.code_name}: {e}"
    assert tensor_name in str(e), f"the message does not name the tensor: {e}"
    assert all(f == (engine.EMISMATCH, True) for f in everyone), everyone


def test_failed_operation_polls_done_and_raises_on_every_synchronize(names, multi_rank):
    nm = names("t")
    handle = hvd.allreduce_async(torch.ones(_shape(False)), name=nm)
    deadline = time.monotonic() + 60
    while not hvd.poll(handle) and time.monotonic() < deadline:
        time.sleep(0.001)
    polled = hvd.poll(handle)
    _, first = catch(hvd.synchronize, handle)
    _, second = catch(hvd.synchronize, handle, timeout=1)
    check_next_operation_works(names("next"))
    assert polled, "poll() never said the failed operation had finished"
    for e in (first, second):
        assert isinstance(e, hvd.ThreelcError) and e.code == engine.EMISMATCH, repr(e)
        assert nm in str(e)


@pytest.mark.late(1)
def test_name_mismatch_fails_after_stall_timeout(names, multi_rank):
    """Rank-dependent names: nothing matches, and after THREELC_STALL_TIMEOUT every rank's
    operation fails with EMISMATCH naming its own name and another rank's. (Needs the
    engine's THREELC_STALL_TIMEOUT; runs late so that with -x a failure here stops only the
    tests after it.)"""
    me, n = rank(), size()
    stall = float(os.environ.get("THREELC_STALL_TIMEOUT", "2"))
    mine = names(f"rank{me}")
    others = [names(f"rank{r}") for r in range(n) if r != me]
    handle = hvd.allreduce_async(torch.ones(3), name=mine)
    _, error = catch(hvd.synchronize, handle, timeout=3 * stall + 4)
    check_next_operation_works(names("next"))
    message = str(error)
    assert isinstance(error, hvd.ThreelcError), f"expected ThreelcError, got {error!r}"
    assert error.code == engine.EMISMATCH, f"{error.code_name}: {message}"
    assert mine in message, f"the message does not name this rank's tensor: {message}"
    assert any(o in message for o in others), \
        f"the message names none of the other ranks' tensors {others}: {message}"


@pytest.mark.late(2)
def test_bool_uint8_mismatch_across_ranks(names, multi_rank):
    """bool on rank 0, uint8 elsewhere under one name: a dtype mismatch like any other
    (Horovod tells bool from uint8). bool is an element type of the engine's own
    (THREELC_BOOL), so its consistency check fails the allgather on every rank naming both
    dtypes, rather than rank 0 getting a bool tensor holding bytes that are not 0 or 1 (7
    here). (late: a fault once found.)"""
    nm = names("t")
    x = torch.ones(2, dtype=torch.bool) if rank() == 0 else torch.full((2,), 7, dtype=torch.uint8)
    out, e = catch(hvd.allgather, x, name=nm)
    check_next_operation_works(names("next"))
    assert isinstance(e, hvd.ThreelcError) and e.code == engine.EMISMATCH, \
        f"no dtype mismatch reported (got {e!r}); result on this rank: {out}"
    assert nm in str(e)
    assert "bool" in str(e) and "uint8" in str(e), f"the message does not name both dtypes: {e}"
