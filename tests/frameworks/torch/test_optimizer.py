"""DistributedOptimizer: gradients allreduced from backward hooks, applied by step().

With Compression.none a step equals a single-process step of the same optimizer on the
gradient averaged (op=Sum: summed) over every rank's loss, which each rank recomputes from
every rank's seeded data; with any compression the parameters stay bitwise identical across
ranks. Also backward_passes_per_step, gradient_predivide_factor, skip_synchronize,
zero_grad before step, named_parameters validation, Compression.fp16 and 3LC.
"""

from __future__ import annotations

import copy
import os
import warnings

import pytest
import torch

import threelc.engine as threelc_engine
import threelc.torch as hvd
from support.torch_helpers import catch, gather_rows, rank, size

LR = 0.1


def make_model(seed, dtype=torch.float64, wide=False):
    """The same model on every rank (seeded); `wide`: a 128x128 layer that 3LC compresses."""
    torch.manual_seed(seed)
    hidden = 128 if wide else 6
    model = torch.nn.Sequential(torch.nn.Linear(4, hidden), torch.nn.Tanh(),
                                torch.nn.Linear(hidden, hidden), torch.nn.Tanh(),
                                torch.nn.Linear(hidden, 2))
    return model.to(dtype)


def batch(salt, r, step, dtype=torch.float64):
    g = torch.Generator().manual_seed(salt * 1009 + r * 101 + step)
    return torch.randn(8, 4, generator=g).to(dtype), torch.randn(8, 2, generator=g).to(dtype)


def loss_of(model, salt, r, step):
    x, y = batch(salt, r, step, next(model.parameters()).dtype)
    return torch.nn.functional.mse_loss(model(x), y)


def local_grads(model, salt, r, steps):
    """The gradient of rank r's loss (accumulated over `steps`) at the model's parameters."""
    m = copy.deepcopy(model)
    m.zero_grad()
    for step in steps:
        loss_of(m, salt, r, step).backward()
    return [p.grad.clone() for p in m.parameters()]


def reference_step(model, opt, salt, steps, combine="average", clip=None):
    """A single-process step of `opt` (on `model`) with every rank's gradients combined."""
    per_rank = [local_grads(model, salt, r, steps) for r in range(size())]
    for i, p in enumerate(model.parameters()):
        total = torch.stack([g[i] for g in per_rank]).sum(0)
        p.grad = total / size() if combine == "average" else total
    if clip is not None:
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
    opt.step()


def flat(model):
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def check_identical(model, name):
    """(collective) the parameters are bitwise identical on every rank."""
    rows = gather_rows(flat(model), name)
    return [r for r, row in enumerate(rows) if not torch.equal(row, rows[0])]


def close(a, b, rtol):
    return torch.allclose(a, b, rtol=rtol, atol=rtol)


def make_pair(salt, optimizer_cls=torch.optim.SGD, dtype=torch.float64, wide=False, **kwargs):
    """(model, its distributed optimizer kwargs factory, reference model, reference opt)."""
    model = make_model(salt, dtype, wide)
    reference = copy.deepcopy(model)
    ref_opt = optimizer_cls(reference.parameters(), lr=LR, **kwargs)
    opt = optimizer_cls(model.parameters(), lr=LR, **kwargs)
    return model, opt, reference, ref_opt


def step_both(model, opt, reference, ref_opt, salt, steps):
    """`steps` steps of the distributed optimizer on this rank's batches and of the
    single-process reference on the averaged gradient."""
    for step in range(steps):
        opt.zero_grad()
        loss_of(model, salt, rank(), step).backward()
        opt.step()
        ref_opt.zero_grad()
        reference_step(reference, ref_opt, salt, [step])


def assert_matches_reference(model, reference, name, rtol=1e-10):
    """The parameters are identical on every rank and equal the reference's."""
    differing = check_identical(model, name)
    assert not differing, f"parameters differ on ranks {differing}"
    assert close(flat(model), flat(reference), rtol), \
        f"max |diff| {(flat(model) - flat(reference)).abs().max().item()}"


@pytest.mark.parametrize("optimizer", ["sgd", "sgd_momentum", "adam"])
def test_matches_single_process_step(optimizer, names, salt):
    """Three steps with Compression.none: each equals the reference step on the averaged
    gradient; the parameters are identical on every rank."""
    cls, kwargs = {"sgd": (torch.optim.SGD, {}),
                   "sgd_momentum": (torch.optim.SGD, {"momentum": 0.9}),
                   "adam": (torch.optim.Adam, {})}[optimizer]
    model, opt, reference, ref_opt = make_pair(salt, cls, **kwargs)
    opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters(),
                                   compression=hvd.Compression.none)
    assert isinstance(opt, cls)
    step_both(model, opt, reference, ref_opt, salt, 3)
    differing = check_identical(model, names("params"))
    assert not differing, f"parameters differ on ranks {differing}"
    assert close(flat(model), flat(reference), 1e-10), \
        f"max |diff| {(flat(model) - flat(reference)).abs().max().item()}"


def test_backward_passes_per_step(names, salt):
    """Two backward passes accumulate locally; one allreduce per step."""
    model, opt, reference, ref_opt = make_pair(salt)
    opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters(),
                                   compression=hvd.Compression.none, backward_passes_per_step=2)
    for step in range(2):
        opt.zero_grad()
        loss_of(model, salt, rank(), 2 * step).backward()
        loss_of(model, salt, rank(), 2 * step + 1).backward()
        opt.step()
        ref_opt.zero_grad()
        reference_step(reference, ref_opt, salt, [2 * step, 2 * step + 1])
    assert_matches_reference(model, reference, names("params"))


def test_too_many_backward_passes_raise(names, salt):
    """A backward pass more than backward_passes_per_step before step() raises
    AssertionError (from the gradient hook) on every rank. (As in Horovod, the gradients
    then in flight are not to be trusted: this test only checks that the optimizer can be
    brought back: synchronize, broadcast the parameters, step again.)"""
    model, opt, _, _ = make_pair(salt)
    opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters(),
                                   compression=hvd.Compression.none, backward_passes_per_step=1)
    opt.zero_grad()
    loss_of(model, salt, rank(), 0).backward()
    _, error = catch(lambda: loss_of(model, salt, rank(), 1).backward())
    opt.synchronize()
    with opt.skip_synchronize():
        opt.step()
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    opt.zero_grad()
    loss_of(model, salt, rank(), 2).backward()
    opt.step()
    differing = check_identical(model, names("params"))
    assert isinstance(error, AssertionError), f"expected AssertionError, got {error!r}"
    assert "backward_passes_per_step" in str(error)
    assert not differing


def test_gradient_predivide_factor(names, salt):
    model, opt, reference, ref_opt = make_pair(salt)
    opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters(),
                                   compression=hvd.Compression.none,
                                   gradient_predivide_factor=2.0)
    step_both(model, opt, reference, ref_opt, salt, 1)
    assert_matches_reference(model, reference, names("params"))


def test_op_sum(names, salt):
    model, opt, reference, ref_opt = make_pair(salt)
    opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters(),
                                   compression=hvd.Compression.none, op=hvd.Sum)
    opt.zero_grad()
    loss_of(model, salt, rank(), 0).backward()
    opt.step()
    reference_step(reference, ref_opt, salt, [0], combine="sum")
    assert_matches_reference(model, reference, names("params"))


def test_synchronize_then_skip_synchronize(names, salt):
    """synchronize(); clip the averaged gradients; step() under skip_synchronize(). A step()
    after synchronize() without skip_synchronize warns (and allreduces again)."""
    model, opt, reference, ref_opt = make_pair(salt)
    opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters(),
                                   compression=hvd.Compression.none)
    opt.zero_grad()
    loss_of(model, salt, rank(), 0).backward()
    opt.synchronize()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 0.05)
    with opt.skip_synchronize():
        opt.step()
    reference_step(reference, ref_opt, salt, [0], clip=0.05)
    after_first = flat(model)
    opt.zero_grad()
    loss_of(model, salt, rank(), 1).backward()
    opt.synchronize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        opt.step()
    differing = check_identical(model, names("params"))
    assert close(after_first, flat(reference), 1e-10)
    assert any("skip_synchronize" in str(w.message) for w in caught)
    assert not differing


def test_zero_grad_before_step_raises(names, salt):
    model, opt, reference, ref_opt = make_pair(salt)
    opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters(),
                                   compression=hvd.Compression.none)
    opt.zero_grad()
    loss_of(model, salt, rank(), 0).backward()
    _, error = catch(opt.zero_grad)
    opt.step()  # the pending allreduces complete: nothing was lost
    opt.zero_grad()  # allowed again
    reference_step(reference, ref_opt, salt, [0])
    differing = check_identical(model, names("params"))
    assert isinstance(error, AssertionError), f"expected AssertionError, got {error!r}"
    assert not differing
    assert close(flat(model), flat(reference), 1e-10)


def test_unused_and_frozen_parameters(names, salt):
    """A parameter the backward pass does not reach gets a zero gradient (allreduced at
    step()); one that does not require grad is left out."""
    model, opt, reference, ref_opt = make_pair(salt)
    unused = torch.nn.Parameter(torch.ones(3, dtype=torch.float64))
    frozen = torch.nn.Parameter(torch.ones(2, dtype=torch.float64), requires_grad=False)
    params = list(model.parameters()) + [unused, frozen]
    named = list(model.named_parameters()) + [("unused", unused), ("frozen", frozen)]
    opt = hvd.DistributedOptimizer(torch.optim.SGD(params, lr=LR), named_parameters=named,
                                   compression=hvd.Compression.none)
    step_both(model, opt, reference, ref_opt, salt, 1)
    assert_matches_reference(model, reference, names("params"))
    assert torch.equal(unused.detach(), torch.ones(3, dtype=torch.float64))
    assert torch.equal(unused.grad, torch.zeros(3, dtype=torch.float64))
    assert frozen.grad is None


def test_without_named_parameters(names, salt):
    model, opt, reference, ref_opt = make_pair(salt)
    opt = hvd.DistributedOptimizer(opt, compression=hvd.Compression.none)
    step_both(model, opt, reference, ref_opt, salt, 1)
    assert_matches_reference(model, reference, names("params"))


def test_named_parameters_validation():
    model = make_model(0)
    params = list(model.parameters())

    def wrap(named, **kwargs):
        return hvd.DistributedOptimizer(torch.optim.SGD(params, lr=LR), named_parameters=named,
                                        **kwargs)

    with pytest.raises(ValueError, match="tuples"):
        wrap(params)
    with pytest.raises(ValueError, match="unique"):
        wrap([("same", p) for p in params])
    with pytest.raises(ValueError, match="not named"):
        wrap(list(model.named_parameters())[:2])
    with pytest.raises(ValueError):
        wrap(model.named_parameters(), backward_passes_per_step=0)
    with pytest.raises(ValueError):
        wrap(model.named_parameters(), op=hvd.Sum, gradient_predivide_factor=2.0)
    with pytest.raises(ValueError):
        wrap(model.named_parameters(), gradient_predivide_factor=0.0)
    with pytest.raises(TypeError):
        wrap(model.named_parameters(), compression="none")
    with pytest.raises(TypeError):
        wrap(model.named_parameters(), process_set=object())


def test_fp16_compression(names, salt):
    """Gradients travel as float16: parameters identical across ranks and close to the
    reference (float16's precision)."""
    model, opt, reference, ref_opt = make_pair(salt, dtype=torch.float32)
    opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters(),
                                   compression=hvd.Compression.fp16)
    step_both(model, opt, reference, ref_opt, salt, 2)
    differing = check_identical(model, names("params"))
    assert not differing
    assert all(p.dtype == torch.float32 for p in model.parameters())
    assert close(flat(model), flat(reference), 2e-3), \
        f"max |diff| {(flat(model) - flat(reference)).abs().max().item()}"


@pytest.mark.parametrize("compression", ["threelc", "threelc_s1.5", "default"])
def test_threelc_compression(compression, names, salt):
    """3LC-compressed gradients (a 128x128 layer is large enough): parameters bitwise
    identical across ranks after every step; the large layer's averaged gradient is not the
    exact average (it was compressed). Compression.default is DistributedOptimizer's default
    and means 3LC unless THREELC_COMPRESSION=none."""
    comp = {"threelc": hvd.Compression.threelc,
            "threelc_s1.5": hvd.Compression.threelc(sparsity=1.5),
            "default": hvd.Compression.default}[compression]
    compressed = compression != "default" or \
        os.environ.get("THREELC_COMPRESSION", "threelc").lower() != "none"
    model, opt, _, _ = make_pair(salt, dtype=torch.float32, wide=True, momentum=0.9)
    kwargs = {} if compression == "default" else {"compression": comp}
    opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters(), **kwargs)
    big = 2  # model.parameters()[2] is the 128x128 weight
    per_rank = [local_grads(model, salt, r, [0])[big] for r in range(size())]
    exact = torch.stack(per_rank).sum(0) / size()
    differing, first = [], None
    for step in range(3):
        opt.zero_grad()
        loss_of(model, salt, rank(), step).backward()
        opt.step()
        if step == 0:
            first = list(model.parameters())[big].grad.clone()
        differing += [(step, r) for r in check_identical(model, names(f"params{step}"))]
    assert not differing, f"parameters differ across ranks (step, rank): {differing}"
    assert torch.isfinite(flat(model)).all()
    error = (first - exact).abs().max().item()
    if size() > 1 and compressed:
        assert error > 1e-4 * exact.abs().max().item(), \
            f"the 128x128 gradient is the exact average (error {error}): not compressed"
    elif not compressed:
        assert error <= 1e-6 * exact.abs().max().item()


def test_wraps_an_optimizer_with_state(names, salt):
    """An optimizer that has stepped before being wrapped keeps its state (momentum), and
    broadcast_optimizer_state works on the wrapped optimizer."""
    model, opt, reference, ref_opt = make_pair(salt, momentum=0.9)
    for o, m in ((opt, model), (ref_opt, reference)):  # one local step, the same everywhere
        o.zero_grad()
        loss_of(m, salt, 0, 100).backward()
        o.step()
    before = copy.deepcopy(opt.state_dict())
    opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters(),
                                   compression=hvd.Compression.none)
    kept = copy.deepcopy(opt.state_dict())
    hvd.broadcast_optimizer_state(opt, root_rank=size() - 1)
    opt.zero_grad()
    loss_of(model, salt, rank(), 0).backward()
    opt.step()
    ref_opt.zero_grad()
    reference_step(reference, ref_opt, salt, [0])
    differing = check_identical(model, names("params"))
    for pid, state in before["state"].items():
        assert torch.equal(kept["state"][pid]["momentum_buffer"], state["momentum_buffer"])
    assert not differing
    assert close(flat(model), flat(reference), 1e-10)


def test_state_dict_carries_error_feedback_and_a_resumed_job_continues_bit_for_bit(names, salt):
    """state_dict() holds this rank's 3LC residuals; an optimizer restored from it continues
    bit for bit like one that never stopped, and one restored without them does not. One
    compressed parameter, so that no fusion (which depends on timing) changes the blocks.
    broadcast_optimizer_state leaves every rank's own residuals alone."""
    def job():
        torch.manual_seed(salt)
        model = torch.nn.Linear(128, 128, bias=False)  # 64 KiB: compressed
        opt = hvd.DistributedOptimizer(
            torch.optim.SGD(model.parameters(), lr=LR, momentum=0.9),
            named_parameters=[(names("w"), model.weight)])
        return model, opt

    def train(model, opt, steps):
        for step in steps:
            opt.zero_grad()
            x = torch.randn(8, 128, generator=torch.Generator().manual_seed(salt + 97 * step
                                                                            + rank()))
            model(x).square().mean().backward()
            opt.step()

    model, opt = job()
    train(model, opt, range(4))
    checkpoint = copy.deepcopy({"model": model.state_dict(), "opt": opt.state_dict()})
    assert "threelc_error_feedback" in checkpoint["opt"]
    hvd.broadcast_optimizer_state(opt, root_rank=0)  # must not hand rank 0's residuals around
    assert torch.equal(opt.state_dict()["threelc_error_feedback"],
                       checkpoint["opt"]["threelc_error_feedback"])
    train(model, opt, range(4, 8))
    uninterrupted = flat(model).clone()

    def resume(with_feedback):
        model, opt = job()
        model.load_state_dict(checkpoint["model"])
        state = dict(checkpoint["opt"])
        if not with_feedback:  # what a fresh engine has: no residuals at all
            state["threelc_error_feedback"] = torch.frombuffer(
                bytearray(threelc_engine.feedback_save("(none)")), dtype=torch.uint8)
        opt.load_state_dict(state)
        train(model, opt, range(4, 8))
        return flat(model).clone()

    assert torch.equal(resume(True).view(torch.int32), uninterrupted.view(torch.int32))
    if size() > 1:
        assert not torch.equal(resume(False), uninterrupted), \
            "the residuals made no difference: the test cannot tell a restore from none"
