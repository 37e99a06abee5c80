"""Mixed precision through the DDP hook: 16-bit buckets (float16 and bfloat16 parameters),
torch.autocast with a GradScaler (fp16: torch 2.3+ on the CPU) and bf16 autocast.

What a loss scaler relies on: a gradient that overflowed on one rank is non-finite on every
rank after the hook (3LC sends a block holding inf or NaN raw and leaves its error feedback
untouched), so every rank's scaler skips that step alike, the ranks stay bitwise identical, and
the residuals stay finite for the steps that follow.
"""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

import threelc.torch as hvd
from support.ddp_helpers import differing_ranks
from support.mixed_precision import (assert_only_the_overflow_step_was_skipped, flat,
                                     require_cpu_grad_scaler, small_net,
                                     train_under_a_grad_scaler, train_under_bf16_autocast)
from support.torch_helpers import (X, assert_averages_within_3lc_bounds, dtype_id,
                                   feedback_residuals)

COUNT = 4096  # gradient elements: 8 KiB in 16 bits, so 3LC compresses them


class Weights(nn.Module):
    """One weight of `dtype` whose gradient is the input: loss = sum(w * x)."""

    def __init__(self, dtype: torch.dtype):
        super().__init__()
        self.w = nn.Parameter(torch.zeros(COUNT, dtype=dtype))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (self.w.float() * x).sum()


def hooked(net: nn.Module, tag: str):
    model = DDP(net)
    state = hvd.DDPHookState(named_parameters=[(f"{tag}/{n}", p)
                                               for n, p in net.named_parameters()])
    model.register_comm_hook(state, hvd.ddp_comm_hook)
    return model, state


def ints(step: int, r: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(7919 * step + r)
    return torch.randint(-int(X), int(X) + 1, (COUNT,), generator=g).to(torch.float32)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=dtype_id)
def test_a_16_bit_bucket_is_compressed_and_a_non_finite_value_reaches_every_rank(dtype):
    """A bucket of `dtype`: step 0 within 3LC's bound of the exact average (plus one rounding
    to `dtype`); step 1 with inf on the last rank: it reaches every rank, the rest stays
    finite; step 2 within the bound error feedback keeps; the residuals finite."""
    if dtype == torch.bfloat16 and int(torch.__version__.split(".")[0]) < 2:
        pytest.skip("torch 1.13's gloo cannot broadcast bfloat16 (DDP's first broadcast of the "
                    "parameters fails with 'Invalid scalar type')")
    n, rank = dist.get_world_size(), dist.get_rank()
    model, state = hooked(Weights(dtype), f"bucket16_{dtype_id(dtype)}")
    data = [[ints(step, r) for r in range(n)] for step in range(3)]
    data[1][n - 1][5] = float("inf")
    grads, differing = [], []
    for step in range(3):
        model.zero_grad()
        model(data[step][rank]).backward()
        grads.append(model.module.w.grad.clone())
        differing += [(step, r) for r in differing_ranks(model.module.w.grad)]
    residual = feedback_residuals(state.state_dict()["error_feedback"])
    assert not differing, f"gradients differ across ranks (step, rank): {differing}"
    assert all(g.dtype == dtype for g in grads)
    assert_averages_within_3lc_bounds(grads, data, dtype, n)
    assert grads[1][5].item() == float("inf")
    assert int((~torch.isfinite(grads[1].float())).sum()) == 1
    if n > 1:  # one rank quantizes nothing: no residuals
        (values,) = residual.values()
        assert values.numel() == COUNT and torch.isfinite(values).all()


def comparer(t: torch.Tensor, _what: str) -> list:
    return differing_ranks(t)


def test_a_grad_scaler_skips_an_overflowing_step_on_every_rank():
    """float16 autocast and a GradScaler; at one step the last rank's 128x128 gradient holds
    an inf. Every rank skips that step (parameters unchanged, scale halved), the others step;
    the parameters stay bitwise identical across ranks and the residuals finite."""
    require_cpu_grad_scaler()
    model, state = hooked(small_net(11), "scaler")
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    outcomes, differ = train_under_a_grad_scaler(
        model, optimizer, lambda scaler: scaler.step(optimizer), seed=11,
        rank=dist.get_rank(), size=dist.get_world_size(), differing=comparer)
    assert_only_the_overflow_step_was_skipped(outcomes, differ)
    assert torch.isfinite(flat(model)).all()
    if dist.get_world_size() > 1:  # one rank quantizes nothing: no residuals
        big = feedback_residuals(state.state_dict()["error_feedback"])["ddp.scaler/2.weight"]
        assert torch.isfinite(big).all()
        assert big.abs().max() > 0, "no residual: the weight was not compressed"


def test_bf16_autocast_through_the_hook_trains_identically_on_every_rank():
    """bfloat16 autocast (float32 parameters and buckets): the loss falls, the parameters stay
    bitwise identical across ranks, the residuals finite."""
    model, state = hooked(small_net(12), "bf16_autocast")
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    train_under_bf16_autocast(model, optimizer, seed=12, rank=dist.get_rank(),
                              differing=comparer)
    residuals = feedback_residuals(state.state_dict()["error_feedback"])
    assert all(torch.isfinite(r).all() for r in residuals.values())
