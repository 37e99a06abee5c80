"""The mixed-precision steps the threelc.torch and DDP suites share: a small network, a
float16-autocast loop under a GradScaler with one rank's gradient overflowing at one step, a
bfloat16-autocast loop, and the checks of their outcomes. The suites differ only in how the
gradients are averaged (DistributedOptimizer or the DDP hook) and how ranks compare tensors
(threelc's allgather or torch.distributed's), which they pass in.
"""

from __future__ import annotations

from typing import Callable, List, Tuple

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

CPU_GRAD_SCALER = getattr(getattr(torch, "amp", None), "GradScaler", None) is not None
OVERFLOW_STEP = 2  # the step at which the last rank's gradient holds an inf
STEPS = 5

# (collective) the ranks whose tensor differs from rank 0's, bit for bit; the str names the
# comparison (threelc's allgather needs a name per call).
Differing = Callable[[torch.Tensor, str], List[int]]
# (step number, parameters unchanged by the step, scale factor of the step, finite gradient)
Outcome = Tuple[bool, float, bool]


def require_cpu_grad_scaler() -> None:
    if not CPU_GRAD_SCALER:
        pytest.skip(f"torch {torch.__version__} has no GradScaler on the CPU (torch 2.3+)")


def bits(t: torch.Tensor) -> torch.Tensor:
    """t's values as int32 bit patterns (16-bit floats widen exactly): for bitwise checks."""
    return t.detach().reshape(-1).to(torch.float32).view(torch.int32)


def small_net(seed: int) -> nn.Module:
    """A 128x128 weight (64 KiB: 3LC-compressed) between small layers (raw); [2] is the big
    one."""
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(32, 128), nn.Tanh(), nn.Linear(128, 128), nn.Tanh(),
                         nn.Linear(128, 4))


def batch(seed: int, rank: int, step: int):
    g = torch.Generator().manual_seed(seed * 1009 + rank * 101 + step)
    return torch.randn(16, 32, generator=g), torch.randint(0, 4, (16,), generator=g)


def flat(module: nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1) for p in module.parameters()])


def network(model: nn.Module) -> nn.Module:
    """The small_net() in `model` (itself, or the module a DDP wraps)."""
    return getattr(model, "module", model)


def train_under_a_grad_scaler(model: nn.Module, optimizer, step: Callable, *, seed: int,
                              rank: int, size: int, differing: Differing):
    """STEPS steps of float16 autocast with a GradScaler on `model` (a small_net(), or a DDP
    of one); at OVERFLOW_STEP the last rank's gradient of the net's [2].weight holds an inf.
    `step(scaler)` runs after the scaled backward and before `scaler.update()`. Returns
    (outcomes, [(step, differing rank)])."""
    net = network(model)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 8, growth_interval=1000)
    big = net[2].weight
    current = {"step": -1}

    def poison(grad):
        if rank != size - 1 or current["step"] != OVERFLOW_STEP:
            return grad
        grad = grad.clone()
        grad[3, 4] = float("inf")
        return grad

    hook = big.register_hook(poison)
    outcomes: List[Outcome] = []
    differ = []
    try:
        for n in range(STEPS):
            current["step"] = n
            optimizer.zero_grad()
            x, y = batch(seed, rank, n)
            with torch.autocast("cpu", dtype=torch.float16):
                loss = F.cross_entropy(model(x), y)
            before, scale = flat(net).clone(), scaler.get_scale()
            scaler.scale(loss).backward()
            step(scaler)
            scaler.update()
            outcomes.append((torch.equal(flat(net), before), scaler.get_scale() / scale,
                             bool(torch.isfinite(big.grad).all())))
            differ += [(n, r) for r in differing(flat(net), f"params{n}")]
    finally:
        hook.remove()
    return outcomes, differ


def assert_only_the_overflow_step_was_skipped(outcomes: List[Outcome], differ) -> None:
    """Every rank skipped OVERFLOW_STEP alike (parameters unchanged, scale halved, the
    gradient non-finite) and took every other step; the ranks' parameters stayed identical."""
    assert not differ, f"parameters differ across ranks (step, rank): {differ}"
    for n, outcome in enumerate(outcomes):
        expected = (True, 0.5, False) if n == OVERFLOW_STEP else (False, 1.0, True)
        assert outcome == expected, \
            f"step {n}: (parameters unchanged, scale factor, finite gradient) = {outcome}, " \
            f"expected {expected}"


def train_under_bf16_autocast(model: nn.Module, optimizer, *, seed: int, rank: int,
                              differing: Differing) -> None:
    """Six steps of bfloat16 autocast on `model` (a small_net(), or a DDP of one), two batches
    seen three times: the loss falls and the ranks' parameters stay bitwise identical."""
    net = network(model)
    losses, differ = [], []
    for n in range(6):
        optimizer.zero_grad()
        x, y = batch(seed, rank, n % 2)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        differ += [(n, r) for r in differing(flat(net), f"params{n}")]
    assert not differ, f"parameters differ across ranks (step, rank): {differ}"
    assert all(p.grad.dtype == torch.float32 for p in net.parameters())
    assert losses[4] + losses[5] < losses[0] + losses[1], losses
