"""Mixed precision through DistributedOptimizer: float16 and bfloat16 gradients 3LC-compressed,
non-finite gradients reaching every rank, torch.autocast with a GradScaler (fp16: torch 2.3+
on the CPU) and bf16 autocast.

What a loss scaler relies on: a gradient that overflowed on one rank is non-finite on every rank
after the allreduce (3LC sends a block holding inf or NaN raw and leaves its error feedback
untouched), so every rank's scaler skips that step alike, the ranks stay bitwise identical, and
the residuals stay finite for the steps that follow.
"""

from __future__ import annotations

import pytest
import torch

import threelc.torch as hvd
from support.mixed_precision import (assert_only_the_overflow_step_was_skipped, bits, flat,
                                     require_cpu_grad_scaler, small_net,
                                     train_under_a_grad_scaler, train_under_bf16_autocast)
from support.torch_helpers import (FEEDBACK, X, assert_averages_within_3lc_bounds, dtype_id,
                                   feedback_residuals, gather_rows, ints, rank, size)

COUNT = 4096  # gradient elements: 8 KiB in 16 bits, so 3LC compresses them


def identical_on_every_rank(t: torch.Tensor, name: str) -> list:
    """(collective) The ranks whose `t` differs from rank 0's, bit for bit."""
    rows = gather_rows(bits(t), name)
    return [r for r, row in enumerate(rows) if not torch.equal(row, rows[0])]


def residuals_of(opt, name: str) -> torch.Tensor:
    return feedback_residuals(opt.state_dict()[FEEDBACK])[f"allreduce.{name}"]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32], ids=dtype_id)
def test_a_non_finite_gradient_reaches_every_rank_and_the_feedback_stays_finite(dtype, names,
                                                                               salt):
    """Step 0 within 3LC's bound of the exact average (plus one rounding to `dtype`); step 1
    with inf on the last rank and NaN on rank 0: both reach every rank, the rest stays finite,
    every rank holds the same bits; step 2 clean again, within the bound that error feedback
    keeps, and the residuals finite."""
    n = size()
    w = torch.nn.Parameter(torch.zeros(COUNT, dtype=dtype))
    opt = hvd.DistributedOptimizer(torch.optim.SGD([w], lr=0.0),
                                   named_parameters=[(names("w"), w)],
                                   compression=hvd.Compression.threelc)
    data = [[ints(salt + step, r, (COUNT,), -int(X), int(X)).to(torch.float32)
             for r in range(n)] for step in range(3)]
    data[1][n - 1][5] = float("inf")
    data[1][0][COUNT - 7] = float("nan")
    grads, differing = [], []
    for step in range(3):
        opt.zero_grad()
        (w.float() * data[step][rank()]).sum().backward()  # w.grad: this rank's data
        opt.synchronize()
        grads.append(w.grad.clone())
        differing += [(step, r) for r in identical_on_every_rank(w.grad, names(f"g{step}"))]
    residual = residuals_of(opt, names("w")) if n > 1 else torch.zeros(COUNT)

    assert all(g.dtype == dtype for g in grads)
    assert not differing, f"gradients differ across ranks (step, rank): {differing}"
    assert_averages_within_3lc_bounds(grads, data, dtype, n)
    poisoned = grads[1].to(torch.float32)
    assert poisoned[5].item() == float("inf")
    assert torch.isnan(poisoned[COUNT - 7])
    assert int((~torch.isfinite(poisoned)).sum()) == 2
    assert torch.isfinite(grads[2]).all()
    assert residual.numel() == COUNT and torch.isfinite(residual).all()
    if n > 1:
        assert residual.abs().max() > 0


def distributed(net, names):
    return hvd.DistributedOptimizer(
        torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9),
        named_parameters=[(names(n), p) for n, p in net.named_parameters()],
        compression=hvd.Compression.threelc)


def comparer(names):
    return lambda t, what: identical_on_every_rank(t, names(what))


def assert_big_residual_finite_and_nonzero(opt, names) -> None:
    if size() > 1:  # one rank quantizes nothing: no residuals
        big = residuals_of(opt, names("2.weight"))
        assert torch.isfinite(big).all()
        assert big.abs().max() > 0, "no residual: the weight was not compressed"


@pytest.mark.parametrize("form", ["scaler_step", "unscale_and_clip", "synchronize_first"])
def test_a_grad_scaler_skips_an_overflowing_step_on_every_rank(form, names, salt):
    """float16 autocast and a GradScaler; at one step the last rank's 128x128 gradient holds
    an inf. Every rank skips that step (parameters unchanged, scale halved), the others step;
    the parameters stay bitwise identical across ranks and the residuals finite.
    scaler_step: ``scaler.step(optimizer)`` right after backward (the scaler's read of the
    groups waits for the allreduces); unscale_and_clip: torch's recipe for clipping,
    ``unscale_()``, ``clip_grad_norm_()``, ``step()``; synchronize_first: Horovod's
    ``synchronize()``, ``unscale_()``, ``step()`` under ``skip_synchronize()``."""
    require_cpu_grad_scaler()
    net = small_net(salt)
    opt = distributed(net, names)

    def step(scaler):
        if form == "unscale_and_clip":
            scaler.unscale_(opt)
            torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        elif form == "synchronize_first":
            opt.synchronize()
            scaler.unscale_(opt)
            with opt.skip_synchronize():
                scaler.step(opt)
            return
        scaler.step(opt)

    outcomes, differ = train_under_a_grad_scaler(net, opt, step, seed=salt, rank=rank(),
                                                 size=size(), differing=comparer(names))
    assert_only_the_overflow_step_was_skipped(outcomes, differ)
    assert torch.isfinite(flat(net)).all()
    assert_big_residual_finite_and_nonzero(opt, names)


def test_bf16_autocast_trains_identically_on_every_rank(names, salt):
    """bfloat16 autocast (float32 parameters and gradients): the loss falls, the parameters
    stay bitwise identical across ranks, the residuals finite."""
    net = small_net(salt)
    opt = distributed(net, names)
    train_under_bf16_autocast(net, opt, seed=salt, rank=rank(), differing=comparer(names))
    if size() > 1:
        assert torch.isfinite(residuals_of(opt, names("2.weight"))).all()
