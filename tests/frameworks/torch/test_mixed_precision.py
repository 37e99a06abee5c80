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
import torch.nn.functional as F

import threelc.torch as hvd
from support.torch_helpers import (X, dtype_id, drift_bound_sum, feedback_residuals,
                                   first_bound_sum, gather_rows, ints, rank, size, ulp)

FEEDBACK = "threelc_error_feedback"  # DistributedOptimizer.state_dict()'s key of the residuals
CPU_GRAD_SCALER = getattr(getattr(torch, "amp", None), "GradScaler", None) is not None
COUNT = 4096  # gradient elements: 8 KiB in 16 bits, so 3LC compresses them


def identical_on_every_rank(t: torch.Tensor, name: str) -> list:
    """(collective) The ranks whose `t` differs from rank 0's, bit for bit."""
    bits = t.detach().reshape(-1).to(torch.float32).view(torch.int32)  # 16 bits: exact
    rows = gather_rows(bits, name)
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
    exact = [torch.stack(d).to(torch.float64).mean(0) for d in data]
    rounding = ulp(dtype, 2 * X)
    first = first_bound_sum(n, 1.0, X) / n * (1 + 1e-5) + rounding
    error0 = (grads[0].to(torch.float64) - exact[0]).abs().max().item()
    assert error0 <= first, f"step 0: error {error0} > bound {first}"
    if n > 1:
        assert error0 > 0, "step 0 is the exact average: nothing was compressed"
    poisoned = grads[1].to(torch.float32)
    assert poisoned[5].item() == float("inf")
    assert torch.isnan(poisoned[COUNT - 7])
    assert int((~torch.isfinite(poisoned)).sum()) == 2
    assert torch.isfinite(grads[2]).all()
    drift = 2 * drift_bound_sum(n, 1.0, X) / n * (1 + 1e-5) + rounding
    error2 = (grads[2].to(torch.float64) - exact[2]).abs().max().item()
    assert error2 <= drift, f"step 2: error {error2} > bound {drift}"
    assert residual.numel() == COUNT and torch.isfinite(residual).all()
    if n > 1:
        assert residual.abs().max() > 0


def make_model(salt: int) -> torch.nn.Module:
    """A 128x128 weight (64 KiB: 3LC-compressed) between small layers (raw)."""
    torch.manual_seed(salt)
    return torch.nn.Sequential(torch.nn.Linear(32, 128), torch.nn.Tanh(),
                               torch.nn.Linear(128, 128), torch.nn.Tanh(),
                               torch.nn.Linear(128, 4))


def batch(salt: int, step: int):
    g = torch.Generator().manual_seed(salt * 1009 + rank() * 101 + step)
    return torch.randn(16, 32, generator=g), torch.randint(0, 4, (16,), generator=g)


def flat(model) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def distributed(model, names):
    return hvd.DistributedOptimizer(
        torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9),
        named_parameters=[(names(n), p) for n, p in model.named_parameters()],
        compression=hvd.Compression.threelc)


@pytest.mark.parametrize("form", ["scaler_step", "unscale_and_clip", "synchronize_first"])
def test_a_grad_scaler_skips_an_overflowing_step_on_every_rank(form, names, salt):
    """float16 autocast and a GradScaler; at step 2 the last rank's 128x128 gradient holds an
    inf. Every rank skips that step (parameters unchanged, scale halved), the others step; the
    parameters stay bitwise identical across ranks and the residuals finite.
    scaler_step: ``scaler.step(optimizer)`` right after backward (the scaler's read of the
    groups waits for the allreduces); unscale_and_clip: torch's recipe for clipping,
    ``unscale_()``, ``clip_grad_norm_()``, ``step()``; synchronize_first: Horovod's
    ``synchronize()``, ``unscale_()``, ``step()`` under ``skip_synchronize()``."""
    if not CPU_GRAD_SCALER:
        pytest.skip(f"torch {torch.__version__} has no GradScaler on the CPU (torch 2.3+)")
    model = make_model(salt)
    opt = distributed(model, names)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 8, growth_interval=1000)
    big = model[2].weight
    overflow_step, poisoned_rank = 2, size() - 1
    current = {"step": -1}

    def poison(grad):
        if rank() != poisoned_rank or current["step"] != overflow_step:
            return grad
        grad = grad.clone()
        grad[3, 4] = float("inf")
        return grad

    hook = big.register_hook(poison)
    outcomes, differing = [], []
    for step in range(5):
        current["step"] = step
        opt.zero_grad()
        x, y = batch(salt, step)
        with torch.autocast("cpu", dtype=torch.float16):
            loss = F.cross_entropy(model(x), y)
        before, scale = flat(model).clone(), scaler.get_scale()
        scaler.scale(loss).backward()
        if form == "scaler_step":
            scaler.step(opt)
        elif form == "unscale_and_clip":
            scaler.unscale_(opt)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(opt)
        else:
            opt.synchronize()
            scaler.unscale_(opt)
            with opt.skip_synchronize():
                scaler.step(opt)
        scaler.update()
        outcomes.append((torch.equal(flat(model), before), scaler.get_scale() / scale,
                         bool(torch.isfinite(big.grad).all())))
        differing += [(step, r) for r in identical_on_every_rank(flat(model),
                                                                 names(f"params{step}"))]
    hook.remove()
    residuals = feedback_residuals(opt.state_dict()[FEEDBACK])

    assert not differing, f"parameters differ across ranks (step, rank): {differing}"
    for step, (unchanged, scale_factor, finite) in enumerate(outcomes):
        if step == overflow_step:
            assert (unchanged, scale_factor, finite) == (True, 0.5, False), \
                f"step {step} (overflow): unchanged {unchanged}, scale x{scale_factor}, " \
                f"finite gradient {finite}"
        else:
            assert (unchanged, scale_factor, finite) == (False, 1.0, True), \
                f"step {step}: unchanged {unchanged}, scale x{scale_factor}, finite {finite}"
    assert torch.isfinite(flat(model)).all()
    if size() > 1:  # one rank quantizes nothing: no residuals
        big_residual = residuals[f"allreduce.{names('2.weight')}"]
        assert torch.isfinite(big_residual).all()
        assert big_residual.abs().max() > 0, "no residual: the weight was not compressed"


def test_bf16_autocast_trains_identically_on_every_rank(names, salt):
    """bfloat16 autocast (float32 parameters and gradients): the loss falls, the parameters
    stay bitwise identical across ranks, the residuals finite."""
    model = make_model(salt)
    opt = distributed(model, names)
    losses, differing = [], []
    for step in range(6):
        opt.zero_grad()
        x, y = batch(salt, step % 2)  # two batches, seen three times: the loss must fall
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
        differing += [(step, r) for r in identical_on_every_rank(flat(model),
                                                                 names(f"params{step}"))]
    residual = residuals_of(opt, names("2.weight")) if size() > 1 else torch.zeros(1)
    assert not differing, f"parameters differ across ranks (step, rank): {differing}"
    assert all(p.grad.dtype == torch.float32 for p in model.parameters())
    assert losses[4] + losses[5] < losses[0] + losses[1], losses
    assert torch.isfinite(residual).all()
