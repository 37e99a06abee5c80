"""Identity, handles and control operations: init, is_initialized, rank, size, local_rank,
local_size, cross_rank, cross_size; barrier, join, poll, synchronize (with a timeout); and,
last of the session, shutdown and init again. (Horovod's build queries: test_horovod_api.py.)"""

from __future__ import annotations

import os
import time

import pytest
import torch

import threelc.torch as hvd
from threelc import engine
from support.torch_helpers import assert_same, catch, op_data, rank, reduce_reference, size


def test_identity():
    n = hvd.size()
    ranks = hvd.allgather_object((hvd.rank(), hvd.local_rank(), hvd.cross_rank()),
                                 name="identity")
    assert hvd.is_initialized()
    assert n == int(os.environ.get("THREELC_SIZE", "1"))
    assert hvd.rank() == int(os.environ.get("THREELC_RANK", "0"))
    assert [r for r, _, _ in ranks] == list(range(n))
    # threelcrun starts every rank on this host: one host, local == global
    assert hvd.local_size() == n and hvd.local_rank() == hvd.rank()
    assert [lr for _, lr, _ in ranks] == list(range(n))
    assert hvd.cross_size() == 1 and hvd.cross_rank() == 0
    assert hvd.global_process_set.size() == n and hvd.global_process_set.rank() == hvd.rank()


def test_init_is_idempotent_and_rejects_horovod_only_arguments():
    hvd.init()  # a no-op while initialized
    hvd.init(process_sets="dynamic")
    assert hvd.is_initialized() and hvd.size() >= 1
    with pytest.raises(NotImplementedError):
        hvd.init(comm=object())
    with pytest.raises(TypeError):
        hvd.init(process_sets=[object()])
    assert hvd.is_initialized()


def test_statistics_count_operations(names):
    before = hvd.statistics()
    for i in range(3):
        hvd.allreduce(torch.ones(4), name=names(str(i)))
    after = hvd.statistics()
    assert after.operations >= before.operations + 3
    assert after.allreduce_bytes >= before.allreduce_bytes + 3 * 16


def test_barrier():
    for _ in range(3):
        assert hvd.barrier() is None
    hvd.barrier(process_set=hvd.global_process_set)


def test_poll_and_synchronize(names, salt):
    inputs = op_data(salt, (1000,), torch.float64, hvd.Sum)
    handle = hvd.allreduce_async(inputs[rank()], name=names("x"), op=hvd.Sum)
    deadline = time.monotonic() + 60
    while not hvd.poll(handle) and time.monotonic() < deadline:
        time.sleep(0.001)
    polled = hvd.poll(handle)
    out = hvd.synchronize(handle)
    again = hvd.synchronize(handle)  # the same outcome again
    assert polled, "poll never said the allreduce finished"
    assert_same(out, reduce_reference(inputs, hvd.Sum), "synchronize after poll")
    assert again is out
    assert hvd.poll(handle)
    assert "Handle" in repr(handle)
    with pytest.raises(TypeError):
        hvd.synchronize(object())
    raw = engine.allreduce(inputs[rank()].numpy(), name=names("raw"))  # a numpy-level handle
    raw.wait()
    with pytest.raises(TypeError):
        hvd.synchronize(raw)


def test_synchronize_timeout(names, multi_rank):
    """Rank 0 submits first and waits with a short timeout (ETIMEOUT, still pending); the
    others submit only after rank 0 has timed out (a broadcast from rank 0 tells them); then
    the operation completes everywhere with the right result."""
    me = rank()
    x = torch.full((3,), float(me + 1))
    timed_out = None
    if me == 0:
        handle = hvd.allreduce_async(x, name=names("late"), op=hvd.Sum)
        _, timed_out = catch(hvd.synchronize, handle, timeout=0.2)
        pending = not hvd.poll(handle)
        hvd.broadcast(torch.ones(1), 0, name=names("go"))
    else:
        hvd.broadcast(torch.ones(1), 0, name=names("go"))
        handle = hvd.allreduce_async(x, name=names("late"), op=hvd.Sum)
        pending = True
    out = hvd.synchronize(handle, timeout=60)
    total = float(sum(range(1, size() + 1)))
    assert_same(out, torch.full((3,), total), "allreduce after a timed-out synchronize")
    if me == 0:
        assert isinstance(timed_out, hvd.ThreelcError), repr(timed_out)
        assert timed_out.code == engine.ETIMEOUT, timed_out
        assert names("late") in str(timed_out)
        assert pending, "the timed-out operation should still have been pending"


def test_join_identity_contributions(names):
    """Rank 0 joins at once; the others allreduce (rank 0 contributes the identity: Sum of
    the others; Max of the others) and allgather (rank 0 contributes no rows); all but the
    last rank then join, the last runs one more allreduce alone and joins last. Every rank's
    join returns the last rank."""
    n, me = size(), rank()
    last = n - 1
    result = {}
    if me == 0 and n > 1:
        result["join"] = hvd.join()
    else:
        x = torch.full((4,), float(me + 1))
        result["sum"] = hvd.allreduce(x, name=names("sum"), op=hvd.Sum)
        result["max"] = hvd.allreduce(x.to(torch.int32), name=names("max"), op=hvd.Max)
        result["gather"] = hvd.allgather(x[: me].reshape(-1, 1), name=names("gather"))
        if me != last:
            result["join"] = hvd.join()
        else:
            # completes once every other rank has joined
            result["alone"] = hvd.allreduce(torch.full((2,), 5.0), name=names("alone"),
                                            op=hvd.Sum)
            result["join"] = hvd.join(device=-1)
    assert result["join"] == last, f"join returned {result['join']}, expected the last rank"
    if me != 0 or n == 1:
        others = list(range(1, n)) if n > 1 else [0]
        assert_same(result["sum"], torch.full((4,), float(sum(r + 1 for r in others))),
                    "allreduce(Sum) with rank 0 joined")
        assert_same(result["max"], torch.full((4,), n, dtype=torch.int32),
                    "allreduce(Max) with rank 0 joined")
        want = torch.cat([torch.full((r, 1), float(r + 1)) for r in others])
        assert_same(result["gather"], want, "allgather with rank 0 joined")
    if me == last and n > 1:
        assert_same(result["alone"], torch.full((2,), 5.0), "allreduce with every other rank "
                                                            "joined")


def test_join_then_collectives_still_work(names):
    assert hvd.join() in range(size())
    out = hvd.allreduce(torch.ones(2), name=names("after"), op=hvd.Sum)
    assert_same(out, torch.full((2,), float(size())), "allreduce after join")


@pytest.mark.late(3)
def test_shutdown_and_init_again(names):
    """Runs last. A pending operation fails with ESHUTDOWN; after shutdown the identity
    functions raise ValueError (as Horovod's) and operations raise ENOTINIT; init() joins
    anew and works.

    The first rank to call shutdown() stops the job's engine on every rank (a later
    submission elsewhere is refused with ESHUTDOWN), so every rank submits its pending
    operation before a barrier and shuts down after it."""
    pending = hvd.allreduce_async(torch.ones(2), name=f"{names('pending')}.{rank()}")
    hvd.barrier()
    hvd.shutdown()
    hvd.shutdown()  # no-op when not initialized
    initialized_after = hvd.is_initialized()
    identity_errors = [catch(f)[1] for f in (hvd.rank, hvd.size, hvd.local_rank,
                                              hvd.local_size, hvd.cross_rank, hvd.cross_size,
                                              hvd.is_homogeneous)]
    _, failed_pending = catch(hvd.synchronize, pending, timeout=30)
    _, refused = catch(hvd.allreduce, torch.ones(2))
    hvd.init()
    out = hvd.allreduce(torch.ones(3), name=names("again"), op=hvd.Sum)
    assert not initialized_after
    assert all(isinstance(e, ValueError) and "init()" in str(e) for e in identity_errors), \
        identity_errors
    if size() > 1:  # (alone, a rank's allreduce completes at once)
        # ESHUTDOWN, or EMISMATCH if the stall timeout fired first (the names differ)
        assert isinstance(failed_pending, hvd.ThreelcError), repr(failed_pending)
        assert failed_pending.code in (engine.ESHUTDOWN, engine.EMISMATCH), failed_pending
    assert isinstance(refused, hvd.ThreelcError) and refused.code == engine.ENOTINIT, \
        repr(refused)
    assert hvd.is_initialized() and hvd.rank() == int(os.environ.get("THREELC_RANK", "0"))
    assert hvd.is_homogeneous()  # learned anew by init()
    assert_same(out, torch.full((3,), float(size())), "allreduce after init again")
