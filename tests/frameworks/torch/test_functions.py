"""broadcast_parameters (state_dict, named_parameters and list forms), broadcast_optimizer_state
(SGD with momentum, Adam: per-parameter state and hyperparameters from the root; an optimizer
without state yet, parameters without gradient, sparse ones), broadcast_object and
allgather_object."""

from __future__ import annotations

import copy

import pytest
import torch

import threelc.torch as hvd
from support.torch_helpers import assert_same, gather_rows, ints, rank, size


def make_model(seed):
    """A small model with parameters, a float buffer and an int64 buffer (BatchNorm)."""
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.BatchNorm1d(6),
                               torch.nn.Tanh(), torch.nn.Linear(6, 2))


def perturb_buffers(model, seed):
    """Rank-dependent buffers: a forward pass in training mode updates the BatchNorm stats."""
    model.train()
    with torch.no_grad():
        model(torch.randn(8, 4, generator=torch.Generator().manual_seed(seed)))
    return model


def state_of(seed):
    return perturb_buffers(make_model(seed), seed).state_dict()


def loss_of(model, salt, r):
    g = torch.Generator().manual_seed(salt * 31 + r)
    x = torch.randn(8, 4, generator=g)
    y = torch.randn(8, 2, generator=g)
    return torch.nn.functional.mse_loss(model(x), y)


def assert_state_equal(got, want, what):
    assert list(got) == list(want), f"{what}: keys differ"
    for k in want:
        assert_same(got[k], want[k], f"{what}: {k}")


@pytest.mark.parametrize("form", ["state_dict", "named_parameters", "parameters"])
def test_broadcast_parameters(form, salt):
    n, me = size(), rank()
    root = 0 if form == "state_dict" else n - 1
    model = perturb_buffers(make_model(salt + me), salt + me)
    root_state = state_of(salt + root)  # what root holds, recomputed here
    params_before = {k: v.clone() for k, v in model.state_dict().items()}
    if form == "state_dict":
        hvd.broadcast_parameters(model.state_dict(), root_rank=root)
    elif form == "named_parameters":
        hvd.broadcast_parameters(model.named_parameters(), root_rank=root)
    else:
        hvd.broadcast_parameters(list(model.parameters()), root)
    got = model.state_dict()
    param_names = {k for k, _ in model.named_parameters()}
    for k, v in got.items():
        if form == "state_dict" or k in param_names:
            assert_same(v, root_state[k], f"{form}: {k} after broadcast_parameters")
        else:  # buffers are not parameters: left alone
            assert_same(v, params_before[k], f"{form}: buffer {k} untouched")
    assert all(p.requires_grad for p in model.parameters())


def test_broadcast_parameters_rejects_bad_arguments():
    with pytest.raises(ValueError):
        hvd.broadcast_parameters(torch.ones(3), root_rank=0)
    with pytest.raises(ValueError):
        hvd.broadcast_parameters({"a": 1.0}, root_rank=0)
    with pytest.raises(ValueError):
        hvd.broadcast_parameters(42, root_rank=0)
    hvd.broadcast_parameters({}, root_rank=0)  # nothing to do


def test_broadcast_parameters_non_contiguous(names, salt):
    """A non-contiguous tensor in the dict is overwritten through its view."""
    n, me = size(), rank()
    bases = [ints(salt, r, (3, 4), -9, 9).float() for r in range(n)]
    mine = bases[me].clone()
    hvd.broadcast_parameters({"w_t": mine.t()}, root_rank=n - 1)
    assert_same(mine, bases[n - 1], "non-contiguous entry after broadcast_parameters")


def _sgd_state_after_step(model, root, salt):
    """Every rank's own SGD: lr and momentum depend on the rank; one local step on this
    rank's loss gives rank-dependent momentum buffers."""
    opt = torch.optim.SGD(model.parameters(), lr=0.1 * (root + 1), momentum=0.5 + 0.1 * root)
    opt.zero_grad()
    loss_of(model, salt, root).backward()
    opt.step()
    return opt


def _adam_after_steps(model, r, salt, steps):
    opt = torch.optim.Adam(model.parameters(), lr=0.01 * (r + 1), betas=(0.8, 0.9 + 0.01 * r))
    for _ in range(steps):
        opt.zero_grad()
        loss_of(model, salt, r).backward()
        opt.step()
    return opt


def _optimizer_state_problems(got_opt, want_opt):
    """What differs between two optimizers' state_dicts (hyperparameters and state)."""
    got, want = got_opt.state_dict(), want_opt.state_dict()
    problems = []
    if len(got["param_groups"]) != len(want["param_groups"]):
        return ["number of param groups"]
    for g, w in zip(got["param_groups"], want["param_groups"]):
        problems += [f"param group {k} = {g.get(k)}, want {v}" for k, v in w.items()
                     if k != "params" and g.get(k) != v]
    if sorted(got["state"]) != sorted(want["state"]):
        return problems + [f"state keys {sorted(got['state'])}, want {sorted(want['state'])}"]
    for pid, state in want["state"].items():
        for key, value in state.items():
            mine = got["state"][pid].get(key)
            same = (isinstance(mine, torch.Tensor) and mine.dtype == value.dtype
                    and torch.equal(mine, value)) if isinstance(value, torch.Tensor) \
                else mine == value
            if not same:
                problems.append(f"state[{pid}][{key}] = {mine}, want {value}")
    return problems


@pytest.mark.parametrize("kind", ["sgd_momentum", "adam", "adam_fresh_non_root"])
def test_broadcast_optimizer_state(kind, names, salt):
    """Every rank's optimizer ends with root's state and hyperparameters (root's optimizer
    is recomputed here from root's seeds); then one more identical step keeps the ranks'
    parameters identical."""
    n, me = size(), rank()
    root = n - 1 if kind == "adam" else 0
    base = make_model(salt)  # the same start everywhere
    model = copy.deepcopy(base)
    reference_model = copy.deepcopy(base)
    if kind == "sgd_momentum":
        opt = _sgd_state_after_step(model, me, salt)
        want = _sgd_state_after_step(reference_model, root, salt)
    elif kind == "adam":
        opt = _adam_after_steps(model, me, salt, steps=me + 1)
        want = _adam_after_steps(reference_model, root, salt, steps=root + 1)
    else:  # only the root has stepped; the others' Adam has no state yet
        opt = _adam_after_steps(model, me, salt, steps=2 if me == root else 0)
        want = _adam_after_steps(reference_model, root, salt, steps=2)
    hvd.broadcast_parameters(model.state_dict(), root_rank=root)
    hvd.broadcast_optimizer_state(opt, root_rank=root)
    problems = _optimizer_state_problems(opt, want)
    # one more step from the same state on the same loss: identical everywhere
    opt.zero_grad()
    loss_of(model, salt, 99).backward()
    opt.step()
    params = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    rows = gather_rows(params, names("params"))
    assert not problems, f"{kind}: optimizer state after broadcast: {problems}"
    for r, row in enumerate(rows):
        assert torch.equal(row, rows[0]), f"rank {r}'s parameters differ after the extra step"


class FrozenIndex(torch.nn.Module):
    """Horovod's test_broadcast_state_no_grad model: an int parameter without gradient."""

    def __init__(self, seed):
        super().__init__()
        torch.manual_seed(seed)
        self.a = torch.nn.Parameter(torch.tensor([1, 3], dtype=torch.int32), requires_grad=False)
        self.b = torch.nn.Parameter(torch.rand(4, dtype=torch.float64))

    def forward(self, x):
        return torch.index_select(self.b, 0, self.a.long()) * x


def test_broadcast_optimizer_state_of_a_fresh_optimizer(names, salt):
    """As Horovod: an optimizer that has not stepped gets zero gradients for the parameters
    that require one (None stays None elsewhere) and one step of its own, not an allreduce;
    then root's state. With weight decay that step moves b, alike on every rank."""
    model = FrozenIndex(salt)
    reference = FrozenIndex(salt)

    def sgd(m):
        return torch.optim.SGD(m.parameters(), lr=0.5, weight_decay=0.1, momentum=0.9,
                               nesterov=True)

    opt = hvd.DistributedOptimizer(sgd(model), named_parameters=model.named_parameters(),
                                   compression=hvd.Compression.none)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    grad = opt.param_groups[0]["params"][1].grad.clone()
    from_root = hvd.broadcast(grad, root_rank=0, name=names("grad"))
    after_start = model.b.detach().clone()
    momentum = opt.state_dict()["state"]
    ref_opt = sgd(reference)
    reference.b.grad = torch.zeros_like(reference.b)
    ref_opt.step()
    opt.zero_grad()
    model(torch.full((2,), 2.0, dtype=torch.float64)).sum().backward()
    opt.step()  # the wrapped optimizer allreduces as before
    rows = gather_rows(model.b.detach(), names("b"))
    assert opt.param_groups[0]["params"][0].grad is None
    assert torch.equal(grad, torch.zeros(4, dtype=torch.float64))
    assert torch.equal(grad, from_root)
    assert list(momentum) == [1], momentum  # b only
    assert_same(after_start, reference.b.detach(), "b after the zero-gradient step")
    assert all(torch.equal(row, rows[0]) for row in rows), "ranks' parameters differ"


def test_broadcast_optimizer_state_creates_sparse_state(names, salt):
    """A fresh SparseAdam (sparse zero gradients), and SGD with momentum on a model's sparse
    Embedding (`model=`) get their state."""
    torch.manual_seed(salt)
    emb = torch.nn.Embedding(5, 2, sparse=True)
    adam = torch.optim.SparseAdam(list(emb.parameters()), lr=0.1)
    hvd.broadcast_optimizer_state(adam, root_rank=0)
    emb_sgd = torch.nn.Embedding(5, 2, sparse=True)
    sgd = torch.optim.SGD(emb_sgd.parameters(), lr=0.1, momentum=0.9)
    hvd.broadcast_optimizer_state(sgd, root_rank=0, model=emb_sgd)
    assert set(adam.state[emb.weight]) >= {"exp_avg", "exp_avg_sq"}
    assert emb.weight.grad.is_sparse and emb_sgd.weight.grad.is_sparse
    assert "momentum_buffer" in sgd.state[emb_sgd.weight]


def test_broadcast_optimizer_state_rejects_lbfgs():
    model = make_model(1)
    with pytest.raises(ValueError):
        hvd.broadcast_optimizer_state(torch.optim.LBFGS(model.parameters()), root_rank=0)


@pytest.mark.parametrize("root_kind", ["first", "last"])
def test_broadcast_object(root_kind, names):
    n, me = size(), rank()
    root = 0 if root_kind == "first" else n - 1
    mine = {"rank": me, "values": list(range(me * 100)), "tensor": torch.arange(me + 1)}
    obj = mine if me == root else ("anything else", me)
    got = hvd.broadcast_object(obj, root_rank=root, name=names("obj"))
    got_unnamed = hvd.broadcast_object(None if me != root else [root] * 3, root)
    want = {"rank": root, "values": list(range(root * 100)), "tensor": torch.arange(root + 1)}
    assert got["rank"] == want["rank"] and got["values"] == want["values"]
    assert torch.equal(got["tensor"], want["tensor"])
    assert got_unnamed == [root] * 3


def test_broadcast_object_default_root():
    got = hvd.broadcast_object("hello" if rank() == 0 else None)
    assert got == "hello"


def test_allgather_object(names):
    n, me = size(), rank()
    got = hvd.allgather_object({"r": me, "s": "x" * (1000 * me)}, name=names("obj"))
    got_unnamed = hvd.allgather_object(me * 1.5)
    assert got == [{"r": r, "s": "x" * (1000 * r)} for r in range(n)]
    assert got_unnamed == [r * 1.5 for r in range(n)]
