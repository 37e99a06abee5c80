"""A name submitted again while this rank has it in flight is refused at submission with a
ValueError, as Horovod's test_horovod_<op>_duplicate_name_error expects: there rank 0 submits
a name twice before the other ranks submit it (the second call must raise), then the other
ranks do the same. Here the second phase uses a name rank 0 has not submitted, so that the
refusal cannot race with the first submission's completion; the refused call changes nothing
(the first submission completes with the right result on every rank)."""

from __future__ import annotations

import pytest
import torch

import threelc.torch as hvd
from threelc import engine
from support.torch_helpers import assert_same, catch, rank, size

SUBMIT = {
    "allreduce": lambda t, nm: hvd.allreduce_async(t, name=nm),
    "allreduce_": lambda t, nm: hvd.allreduce_async_(t.clone(), name=nm),
    "allgather": lambda t, nm: hvd.allgather_async(t, name=nm),
    "broadcast": lambda t, nm: hvd.broadcast_async(t, 0, name=nm),
    "alltoall": lambda t, nm: hvd.alltoall_async(t, name=nm),
    "reducescatter": lambda t, nm: hvd.reducescatter_async(t, name=nm),
    "push_pull": lambda t, nm: hvd.push_pull_async(t, name=nm),
}
# The second call in its synchronous form: refused at once too, before it would wait.
AGAIN = dict(SUBMIT, allreduce=lambda t, nm: hvd.allreduce(t, name=nm),
             allgather=lambda t, nm: hvd.allgather(t, name=nm),
             reducescatter=lambda t, nm: hvd.reducescatter(t, name=nm))


def data():
    return torch.arange(6 * size(), dtype=torch.float32).reshape(2 * size(), 3) + rank()


def outcome(handle):
    out = hvd.synchronize(handle)
    return out[0] if isinstance(out, tuple) else out  # alltoall: (rows, received splits)


@pytest.mark.parametrize("kind", list(SUBMIT))
def test_a_name_in_flight_is_refused_with_value_error(kind, names, multi_rank):
    submit, again = SUBMIT[kind], AGAIN[kind]
    t = data()
    first, second = names("first"), names("second")
    if rank() == 0:
        h_first = submit(t, first)
        _, refused = catch(again, t, first)
    hvd.barrier()
    if rank() != 0:
        h_first = submit(t, first)  # rank 0's is still pending: they run together
        h_second = submit(t, second)
        _, refused = catch(again, t, second)
    hvd.barrier()
    if rank() == 0:
        h_second = submit(t, second)
    got = [outcome(h_first), outcome(h_second)]
    expected = outcome(submit(t, names("reference")))  # the same operation, never refused
    assert isinstance(refused, ValueError), f"rank {rank()}: {refused!r}"
    assert isinstance(refused, hvd.ThreelcError) and refused.code == engine.EDUPLICATE
    assert isinstance(refused, hvd.DuplicateNameError)
    assert "already in flight on this rank" in str(refused), str(refused)
    for i, out in enumerate(got):
        assert_same(out, expected, f"{kind}: submission {i} beside the refused one")
