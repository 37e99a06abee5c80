"""Process sets through threelc.torch (Horovod's API): the even ranks and the odd ranks each
form a set (with 2 ranks: [0] and [1], sets of one rank) and run every collective among
themselves, the results checked exactly against references computed from every member's
seeded data; autograd, DistributedOptimizer, broadcast_parameters and the object collectives
in a set; barrier; the refusals (a non-member, a duplicate set, a removed set); init(process_sets).

Every test starts and ends with the global set alone (the `clean` fixture): sets are removed in
`finally`, so a failing test leaves no set behind for the next.
"""

from __future__ import annotations

import copy
import time

import pytest
import torch

import threelc.engine as engine
import threelc.torch as hvd
from support.torch_helpers import (FEEDBACK, assert_same, catch, dtype_id, feedback_residuals, ints,
                                   op_data, op_id, rank, reduce_reference, rows_of, size)

pytestmark = pytest.mark.usefixtures("multi_rank")  # one rank: no two disjoint sets

REDUCE_DTYPES = [torch.int32, torch.float16, torch.float32, torch.float64]
REDUCE_OPS = [hvd.Sum, hvd.Average, hvd.Min, hvd.Max]


@pytest.fixture(autouse=True)
def clean():
    """The engine knows the global set only, before and after every test."""
    assert engine.process_set_ids() == [0], "a test left a process set behind"
    yield
    assert engine.process_set_ids() == [0], "the test left a process set behind"


@pytest.fixture
def sets():
    """(mine, other): this rank's set and the other one, of the even and the odd ranks."""
    even = hvd.add_process_set([r for r in range(size()) if r % 2 == 0])
    try:
        odd = hvd.add_process_set(range(1, size(), 2))
        try:
            yield (even, odd) if rank() % 2 == 0 else (odd, even)
        finally:
            hvd.remove_process_set(odd)
    finally:
        hvd.remove_process_set(even)


def members(inputs, ps):
    """The members' entries of a per-rank list, in member order."""
    return [inputs[r] for r in ps.ranks]


# --------------------------------------------------------------------------- the objects

def test_process_set_objects(sets):
    mine, other = sets
    n = size()
    assert hvd.global_process_set.process_set_id == 0
    assert hvd.global_process_set.ranks == list(range(n))
    assert hvd.global_process_set.size() == n and hvd.global_process_set.rank() == rank()
    assert min(mine.process_set_id, other.process_set_id) > 0
    assert mine.process_set_id != other.process_set_id
    assert mine.ranks == sorted(r for r in range(n) if r % 2 == rank() % 2)
    assert mine.size() == len(mine.ranks) and mine.rank() == mine.ranks.index(rank())
    assert mine.included() and not other.included()
    assert other.size() == len(other.ranks)
    assert isinstance(catch(other.rank)[1], ValueError)  # not a member
    assert str(mine) == f"ProcessSet(process_set_id={mine.process_set_id}, ranks={mine.ranks})"
    fresh = hvd.ProcessSet([2, 0, 1])
    assert fresh.ranks == [0, 1, 2] and fresh.process_set_id is None
    assert fresh.size() is None and fresh.rank() is None
    for bad in (5, ["a"], [0.5], [True]):
        assert isinstance(catch(hvd.ProcessSet, bad)[1], ValueError), bad


# ---------------------------------------------------------------------------- allreduce

@pytest.mark.parametrize("op", REDUCE_OPS, ids=op_id)
@pytest.mark.parametrize("dtype", REDUCE_DTYPES, ids=dtype_id)
def test_allreduce(dtype, op, sets, names, salt):
    """allreduce, allreduce_, allreduce_async (with prescale and postscale) and
    grouped_allreduce in a set: the reduction over its members (Average divides by its size);
    the same name in the set and in the global set at once."""
    mine, _ = sets
    inputs = op_data(salt, (4, 3), dtype, op)
    pre, post = (0.5, 3.0) if dtype.is_floating_point else (1.0, 1.0)
    x = inputs[rank()]
    y = x.clone()
    out = hvd.allreduce(x, name=names("a"), op=op, process_set=mine)
    hvd.allreduce_(y, name=names("b"), op=op, process_set=mine)
    in_set = hvd.allreduce_async(x, name=names("c"), op=op, prescale_factor=pre,
                                 postscale_factor=post, process_set=mine)
    everyone = hvd.allreduce_async(x, name=names("c"), op=op)  # same name, global set
    scaled, global_out = hvd.synchronize(in_set), hvd.synchronize(everyone)
    grouped = hvd.grouped_allreduce([x, x[:2]], name=names("g"), op=op, process_set=mine)
    expected = reduce_reference(members(inputs, mine), op)
    assert_same(out, expected, "allreduce")
    assert_same(y, expected, "allreduce_")
    assert_same(scaled, reduce_reference(members(inputs, mine), op, pre, post), "scaled")
    assert_same(global_out, reduce_reference(inputs, op), "the global set's allreduce")
    assert_same(grouped[0], expected, "grouped_allreduce[0]")
    assert_same(grouped[1], reduce_reference([t[:2] for t in members(inputs, mine)], op),
                "grouped_allreduce[1]")


def test_grouped_allreduce_in_place(sets, names, salt):
    mine, _ = sets
    a = op_data(salt, (5,), torch.float32, hvd.Sum)
    b = op_data(salt + 1, (2, 2), torch.int32, hvd.Sum)
    ta, tb = a[rank()].clone(), b[rank()].clone()
    hvd.synchronize(hvd.grouped_allreduce_async_([ta, tb], name=names("g"), op=hvd.Sum,
                                                 process_set=mine))
    assert_same(ta, reduce_reference(members(a, mine), hvd.Sum), "tensor 0")
    assert_same(tb, reduce_reference(members(b, mine), hvd.Sum), "tensor 1")


def test_sparse_allreduce(sets, names, salt):
    """sparse_allreduce_async in a set: Average divides by the set's size."""
    mine, _ = sets
    dense = [ints(salt, r, (6, 3), -4, 4).double() * (ints(salt + 1, r, (6, 1), 0, 1))
             for r in range(size())]
    handle = hvd.sparse_allreduce_async(dense[rank()].to_sparse(), name=names("s"),
                                        op=hvd.Average, process_set=mine)
    got = handle().to_dense()
    assert_same(got, reduce_reference(members(dense, mine), hvd.Average), "sparse average")


# ---------------------------------------------------------------- allgather, broadcast

def gather_input(salt, r):
    return ints(salt, r, (r % 3 + 1, 2), -50, 50).float()


def test_allgather(sets, names, salt):
    """allgather, allgather_async and grouped_allgather: the members' rows in member order."""
    mine, _ = sets
    x = gather_input(salt, rank())
    out = hvd.allgather(x, name=names("a"), process_set=mine)
    async_out = hvd.synchronize(hvd.allgather_async(x.int(), name=names("b"), process_set=mine))
    grouped = hvd.grouped_allgather([x, x.double()], name=names("g"), process_set=mine)
    expected = torch.cat([gather_input(salt, r) for r in mine.ranks])
    assert_same(out, expected, "allgather")
    assert_same(async_out, expected.int(), "allgather_async")
    assert_same(grouped[0], expected, "grouped_allgather[0]")
    assert_same(grouped[1], expected.double(), "grouped_allgather[1]")


def test_broadcast(sets, names, salt):
    """broadcast, broadcast_ and broadcast_async from every member (a job rank)."""
    mine, other = sets
    results = []
    for root in mine.ranks:
        x = ints(salt, rank(), (3, 2), -9, 9).to(torch.int64)
        y = x.clone()
        out = hvd.broadcast(x, root, name=names(f"a{root}"), process_set=mine)
        hvd.broadcast_(y, root, name=names(f"b{root}"), process_set=mine)
        results.append((root, x, out, y))
    _, outside = catch(hvd.broadcast, torch.ones(2), other.ranks[0], name=names("outside"),
                       process_set=mine)
    for root, x, out, y in results:
        expected = ints(salt, root, (3, 2), -9, 9).to(torch.int64)
        assert_same(out, expected, f"broadcast from {root}")
        assert_same(y, expected, f"broadcast_ from {root}")
        assert_same(x, ints(salt, rank(), (3, 2), -9, 9), "the input")
    assert isinstance(outside, ValueError) and isinstance(outside, hvd.ThreelcError), outside


# ---------------------------------------------------------------- alltoall, reducescatter

def count(sender, receiver_index):
    """Rows that job rank `sender` sends to the member at `receiver_index` of its set."""
    return 1 + (sender + receiver_index) % 2


def test_alltoall(sets, names, salt):
    """Splits have one entry per member; rows arrive in member order."""
    mine, _ = sets
    k = mine.size()

    def data(r):
        return ints(salt, r, (sum(count(r, j) for j in range(k)), 2), -99, 99)

    splits = [count(rank(), j) for j in range(k)]
    out, received = hvd.alltoall(data(rank()), splits=splits, name=names("a"), process_set=mine)
    even = hvd.alltoall(ints(salt, rank(), (2 * k, 1), 0, 9), name=names("b"), process_set=mine)
    me = mine.rank()
    parts = [data(s).narrow(0, sum(count(s, j) for j in range(me)), count(s, me))
             for s in mine.ranks]
    assert_same(out, torch.cat(parts), "alltoall")
    assert_same(received, torch.tensor([count(s, me) for s in mine.ranks], dtype=torch.int32),
                "received splits")
    assert_same(even, torch.cat([ints(salt, s, (2 * k, 1), 0, 9)[2 * me:2 * me + 2]
                                 for s in mine.ranks]), "alltoall in equal parts")


@pytest.mark.parametrize("op", [hvd.Sum, hvd.Average], ids=["sum", "average"])
def test_reducescatter(op, sets, names, salt):
    """Member i gets the i-th part of the reduction over the members (grouped too)."""
    mine, _ = sets
    k = mine.size()
    rows = 2 * k + 1
    inputs = op_data(salt, (rows, 3), torch.float32, op)
    out = hvd.reducescatter(inputs[rank()], name=names("a"), op=op, process_set=mine)
    grouped = hvd.grouped_reducescatter([inputs[rank()], inputs[rank()][:k]], name=names("g"),
                                        op=op, process_set=mine)
    whole = reduce_reference(members(inputs, mine), op)
    offset, n = rows_of(mine.rank(), rows, k)
    assert_same(out, whole[offset:offset + n], "reducescatter")
    assert_same(grouped[0], whole[offset:offset + n], "grouped_reducescatter[0]")
    assert_same(grouped[1], whole[:k][mine.rank():mine.rank() + 1], "grouped_reducescatter[1]")


# ------------------------------------------------------------------------------- autograd

def test_autograd(sets, names, salt):
    """The backward passes run in the forward's set: allreduce's gradient is the members' sum
    (Sum) or mean (Average) of the incoming gradients; allgather's this member's rows of their
    mean; broadcast's their mean on the root, zeros elsewhere."""
    mine, _ = sets
    k = mine.size()

    def w(r, shape, offset=0):
        return ints(salt + offset, r, shape, -6, 6).double()

    grads = {}
    for op, tag in ((hvd.Sum, "sum"), (hvd.Average, "avg")):
        x = w(rank(), (3,), 10).requires_grad_()
        (hvd.allreduce(x, name=names(tag), op=op, process_set=mine) * w(rank(), (3,))).sum() \
            .backward()
        grads[tag] = x.grad
    x = w(rank(), (2, 3), 20).requires_grad_()
    (hvd.allgather(x, name=names("g"), process_set=mine) * w(rank(), (2 * k, 3), 1)).sum() \
        .backward()
    grads["allgather"] = x.grad
    root = mine.ranks[-1]
    x = w(rank(), (4,), 30).requires_grad_()
    (hvd.broadcast(x, root, name=names("b"), process_set=mine) * w(rank(), (4,), 2)).sum() \
        .backward()
    grads["broadcast"] = x.grad
    assert_same(grads["sum"], reduce_reference([w(r, (3,)) for r in mine.ranks], hvd.Sum), "sum")
    assert_same(grads["avg"], reduce_reference([w(r, (3,)) for r in mine.ranks], hvd.Average),
                "average")
    mean = reduce_reference([w(r, (2 * k, 3), 1) for r in mine.ranks], hvd.Average)
    assert_same(grads["allgather"], mean[2 * mine.rank():2 * mine.rank() + 2], "allgather")
    mean = reduce_reference([w(r, (4,), 2) for r in mine.ranks], hvd.Average)
    assert_same(grads["broadcast"], mean if rank() == root else torch.zeros(4, dtype=mean.dtype),
                "broadcast")


# ------------------------------------------------------------- optimizer and functions

def make_model(seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(4, 5), torch.nn.Tanh(),
                               torch.nn.Linear(5, 2)).double()


def loss_of(model, salt, r, step):
    g = torch.Generator().manual_seed(salt * 1009 + r * 101 + step)
    x, y = torch.randn(8, 4, generator=g).double(), torch.randn(8, 2, generator=g).double()
    return torch.nn.functional.mse_loss(model(x), y)


@pytest.mark.parametrize("which", ["mine", "even"])
def test_distributed_optimizer(which, sets, names, salt):
    """Gradients averaged over the optimizer's set: two steps equal a local step on the mean
    of the members' gradients; a rank outside the set (`even`: the odd ranks) steps on its own
    gradients, as in Horovod."""
    mine, other = sets
    ps = mine if which == "mine" or rank() % 2 == 0 else other
    model = make_model(salt)
    reference = copy.deepcopy(model)
    ref_opt = torch.optim.SGD(reference.parameters(), lr=0.1, momentum=0.9)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9),
                                   named_parameters=model.named_parameters(),
                                   compression=hvd.Compression.none, process_set=ps)
    contributors = ps.ranks if ps.included() else [rank()]
    for step in range(2):
        opt.zero_grad()
        loss_of(model, salt, rank(), step).backward()
        opt.step()
        per_rank = []
        for r in contributors:
            m = copy.deepcopy(reference)
            loss_of(m, salt, r, step).backward()
            per_rank.append([p.grad for p in m.parameters()])
        for i, p in enumerate(reference.parameters()):
            p.grad = reduce_reference([g[i] for g in per_rank], hvd.Average)
        ref_opt.step()
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    gathered = hvd.allgather(flat.reshape(1, -1), name=names("params"), process_set=mine)
    for p, q in zip(model.parameters(), reference.parameters()):
        assert torch.allclose(p, q, rtol=1e-12, atol=1e-14), (p - q).abs().max()
    if ps is mine:  # every member holds the same parameters
        assert all(torch.equal(row, gathered[0]) for row in gathered), "members differ"


def test_distributed_optimizer_residuals_are_the_sets(sets, names, salt):
    """3LC residuals of an optimizer in a set live under process_set.<id>/ (its state_dict
    holds those), and go when the set is removed."""
    mine, _ = sets
    torch.manual_seed(salt)
    model = torch.nn.Linear(32, 32)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.01),
                                   named_parameters=model.named_parameters(),
                                   compression=hvd.Compression.threelc, process_set=mine)
    x = torch.randn(4, 32, generator=torch.Generator().manual_seed(salt + rank()))
    model(x).square().sum().backward()
    opt.step()
    residuals = feedback_residuals(opt.state_dict()[FEEDBACK])
    prefix = f"process_set.{mine.process_set_id}/allreduce."
    assert all(n.startswith(prefix) for n in residuals), sorted(residuals)
    if mine.size() > 1:  # one rank alone quantizes nothing
        assert f"{prefix}weight" in residuals, sorted(residuals)


def test_broadcast_parameters_and_objects(sets, names, salt):
    """broadcast_parameters, broadcast_optimizer_state, broadcast_object and allgather_object
    in a set, from its last member."""
    mine, _ = sets
    root = mine.ranks[-1]
    model = make_model(salt + rank())
    opt = torch.optim.SGD(model.parameters(), lr=0.1 * (rank() + 1), momentum=0.5)
    hvd.broadcast_parameters(model.state_dict(), root_rank=root, process_set=mine)
    hvd.broadcast_optimizer_state(opt, root_rank=root, process_set=mine)
    obj = hvd.broadcast_object({"from": rank()}, root_rank=root, name=names("o"),
                               process_set=mine)
    gathered = hvd.allgather_object(("rank", rank()), name=names("g"), process_set=mine)
    for (name, p), q in zip(model.state_dict().items(), make_model(salt + root).state_dict()
                            .values()):
        assert_same(p, q, name)
    assert opt.param_groups[0]["lr"] == 0.1 * (root + 1)
    assert obj == {"from": root}
    assert gathered == [("rank", r) for r in mine.ranks]


# ------------------------------------------------------------------------------- barrier

def test_barrier(sets):
    """A member waits in barrier(process_set=...) for its set's last member only; a rank
    outside the set is refused."""
    mine, other = sets
    sleeper = mine.ranks[-1]
    start = time.monotonic()
    if rank() == sleeper:
        time.sleep(0.5)
    hvd.barrier(process_set=mine)
    waited = time.monotonic() - start
    _, refused = catch(hvd.barrier, process_set=other)
    if rank() != sleeper:
        assert waited >= 0.45, f"barrier returned after {waited:.3f} s, before rank {sleeper}"
    assert isinstance(refused, hvd.ThreelcError) and \
        f"process set {other.process_set_id}" in str(refused), refused


# ------------------------------------------------------------------------------ refusals

def test_non_member_is_refused(sets, names):
    """Every collective submitted to a set this rank is not in raises at once, naming the set;
    the next global operation works."""
    _, other = sets
    t, root = torch.ones(2, 2), other.ranks[0]
    calls = {
        "allreduce": lambda: hvd.allreduce(t, process_set=other),
        "allreduce_": lambda: hvd.allreduce_(t.clone(), process_set=other),
        "allreduce_async": lambda: hvd.allreduce_async(t, process_set=other),
        "grouped_allreduce": lambda: hvd.grouped_allreduce([t, t], process_set=other),
        "allgather": lambda: hvd.allgather(t, process_set=other),
        "grouped_allgather": lambda: hvd.grouped_allgather([t], process_set=other),
        "broadcast": lambda: hvd.broadcast(t, root, process_set=other),
        "broadcast_": lambda: hvd.broadcast_(t.clone(), root, process_set=other),
        "alltoall": lambda: hvd.alltoall(t, process_set=other),
        "reducescatter": lambda: hvd.reducescatter(t, process_set=other),
        "grouped_reducescatter": lambda: hvd.grouped_reducescatter([t], process_set=other),
        "sparse_allreduce_async": lambda: hvd.sparse_allreduce_async(
            t.to_sparse(), names("s"), hvd.Sum, process_set=other),
        "barrier": lambda: hvd.barrier(process_set=other),
        "broadcast_object": lambda: hvd.broadcast_object(1, root, process_set=other),
        "allgather_object": lambda: hvd.allgather_object(1, process_set=other),
        "broadcast_parameters": lambda: hvd.broadcast_parameters([t.clone()], root,
                                                                 process_set=other),
    }
    errors = {kind: catch(call)[1] for kind, call in calls.items()}
    after = hvd.allreduce(torch.ones(2), op=hvd.Sum)
    for kind, e in errors.items():
        assert isinstance(e, (ValueError, hvd.ThreelcError)), f"{kind}: {e!r}"
        assert f"process set {other.process_set_id}" in str(e), f"{kind}: {e}"
    assert_same(after, torch.full((2,), float(size())), "global allreduce after the refusals")


def test_duplicate_set_is_refused(sets):
    mine, _ = sets
    errors = [catch(hvd.add_process_set, ranks)[1]
              for ranks in (mine.ranks, list(reversed(mine.ranks)), range(size()),
                            hvd.ProcessSet(mine.ranks), [0, size()], [0, 0])]
    again = catch(hvd.add_process_set, mine)[1]
    for e in errors + [again]:
        assert isinstance(e, ValueError), repr(e)
    assert "duplicate" in str(errors[0]) and f"process set {mine.process_set_id}" in \
        str(errors[0]), errors[0]
    assert "duplicate" in str(errors[2]) and "process set 0" in str(errors[2]), errors[2]


def test_remove_then_use_is_refused(names):
    """A removed set is refused (ValueError naming it), removing it again or removing the
    global set returns False, and ids are not reused."""
    ps = hvd.add_process_set([size() - 1])
    first_id = ps.process_set_id
    removed = hvd.remove_process_set(ps)
    _, refused = catch(hvd.allreduce, torch.ones(2), name=names("x"), process_set=ps)
    again = hvd.remove_process_set(ps)
    unregistered = hvd.remove_process_set(hvd.ProcessSet([0]))
    global_removed = hvd.remove_process_set(hvd.global_process_set)
    ps2 = hvd.add_process_set([size() - 1])
    try:
        assert removed and not again and not unregistered and not global_removed
        assert ps.process_set_id is None
        assert isinstance(refused, ValueError) and str(ps.ranks) in str(refused), refused
        assert ps2.process_set_id > first_id, (ps2, first_id)
    finally:
        hvd.remove_process_set(ps2)
    assert hvd.global_process_set.process_set_id == 0
    assert hvd.global_process_set.ranks == list(range(size()))
    assert_same(hvd.allreduce(torch.ones(2), op=hvd.Sum), torch.full((2,), float(size())),
                "global allreduce")


# ------------------------------------------------------------------------ init(process_sets)

def test_init_registers_process_sets(names):
    """init(process_sets=[...]) while running registers the sets in order (again: kept);
    duplicates are refused before anything is added."""
    a, b = hvd.ProcessSet([0]), hvd.ProcessSet([size() - 1])
    dup_errors = [catch(hvd.init, process_sets=sets)[1]
                  for sets in ([hvd.ProcessSet([0]), hvd.ProcessSet([0])],
                               [hvd.ProcessSet(range(size()))])]
    left_after_refusals = engine.process_set_ids()
    hvd.init(process_sets=[a, b])
    try:
        ids = (a.process_set_id, b.process_set_id)
        hvd.init(process_sets=[a, b])
        kept = (a.process_set_id, b.process_set_id)
        mine = a if rank() == 0 else b if rank() == size() - 1 else None
        out = hvd.allreduce(torch.ones(1), name=names("x"), process_set=mine) \
            if mine is not None else torch.ones(1)
    finally:
        hvd.remove_process_set(a)
        hvd.remove_process_set(b)
    assert all(isinstance(e, ValueError) and "duplicate" in str(e) for e in dup_errors), \
        dup_errors
    assert left_after_refusals == [0]
    assert ids[0] > 0 and ids[1] == ids[0] + 1 and kept == ids, (ids, kept)
    assert_same(out, torch.ones(1), "allreduce in a set of one rank")


@pytest.mark.late(3)
def test_init_after_shutdown_registers_sets_from_one(names):
    """A fresh engine numbers init()'s sets from 1; shutdown() takes the ids away."""
    n = size()
    leftover = hvd.add_process_set([0])
    hvd.barrier()
    hvd.shutdown()
    forgotten = leftover.process_set_id
    even = hvd.ProcessSet(range(0, n, 2))
    odd = hvd.ProcessSet(range(1, n, 2))
    hvd.init(process_sets=[even, odd])
    try:
        ids = (even.process_set_id, odd.process_set_id)
        mine = even if rank() % 2 == 0 else odd
        out = hvd.allreduce(torch.ones(1), name=names("x"), op=hvd.Sum, process_set=mine)
    finally:
        hvd.remove_process_set(odd)
        hvd.remove_process_set(even)
    assert forgotten is None
    assert ids == (1, 2), ids
    assert hvd.global_process_set.ranks == list(range(size()))
    assert_same(out, torch.full((1,), float(len(mine.ranks))), "allreduce in a set")
