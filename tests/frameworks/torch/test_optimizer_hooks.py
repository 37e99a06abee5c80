"""DistributedOptimizer's gradient hooks on this torch: ``register_post_accumulate_grad_hook``
from torch 2.1 on, the gradient accumulator's hook on torch 1.13 (the suite runs on both). Each
fires once per parameter and backward pass, after the whole gradient is accumulated: a weight
used twice in one forward pass (tied) is allreduced once, with both uses' gradient.
"""

from __future__ import annotations

import copy
import gc

import torch
import torch.utils.hooks

import threelc.torch as hvd
from support.torch_helpers import gather_rows, rank, size

POST_ACCUMULATE = hasattr(torch.Tensor, "register_post_accumulate_grad_hook")


class Tied(torch.nn.Module):
    """One 8x8 weight applied twice, then a head."""

    def __init__(self):
        super().__init__()
        self.shared = torch.nn.Linear(8, 8, bias=False).double()
        self.head = torch.nn.Linear(8, 2).double()

    def forward(self, x):
        return self.head(torch.tanh(self.shared(torch.tanh(self.shared(x)))))


def loss_of(model, salt: int, r: int):
    g = torch.Generator().manual_seed(salt * 31 + r)
    x = torch.randn(4, 8, generator=g, dtype=torch.float64)
    return model(x).square().mean()


def test_the_hooks_are_this_torchs_and_a_tied_weight_is_allreduced_once(names, salt):
    torch.manual_seed(salt)
    model = Tied()
    reference = copy.deepcopy(model)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=[(names(n), p)
                                                     for n, p in model.named_parameters()],
                                   compression=hvd.Compression.none)
    hooks = list(opt._hooks)
    for step in range(2):  # a second step: the hooks fire again, once each
        opt.zero_grad()
        loss_of(model, salt + step, rank()).backward()
        opt.step()
        per_rank = []
        for r in range(size()):
            m = copy.deepcopy(reference)
            loss_of(m, salt + step, r).backward()
            per_rank.append([p.grad for p in m.parameters()])
        with torch.no_grad():
            for i, p in enumerate(reference.parameters()):
                p -= 0.1 * torch.stack([g[i] for g in per_rank]).mean(0)
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    rows = gather_rows(flat, names("params"))

    assert len(hooks) == 3  # shared.weight, head.weight, head.bias
    if POST_ACCUMULATE:
        assert all(isinstance(h, torch.utils.hooks.RemovableHandle) for h in hooks), hooks
    else:  # the accumulators themselves, kept alive
        assert all(type(h).__name__ == "AccumulateGrad" for h in hooks), hooks
    assert all(torch.equal(row, rows[0]) for row in rows)
    expected = torch.cat([p.detach().reshape(-1) for p in reference.parameters()])
    assert torch.allclose(flat, expected, rtol=1e-12, atol=1e-12), \
        f"max |diff| {(flat - expected).abs().max().item()}"


def wrap(model, names):
    return hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                    named_parameters=[(names(n), p)
                                                      for n, p in model.named_parameters()],
                                    compression=hvd.Compression.none)


def test_a_discarded_optimizer_no_longer_allreduces(names, salt):
    """A model wrapped again after its first DistributedOptimizer was dropped: only the new
    one's hooks fire (the old ones would submit every gradient a second time, under the same
    name, and the engine refuses a name already in flight)."""
    torch.manual_seed(salt)
    model = Tied()
    first = wrap(model, names)
    loss_of(model, salt, rank()).backward()
    first.step()
    del first
    gc.collect()
    second = wrap(model, names)
    before = hvd.statistics().allreduce_bytes
    for step in range(2):
        second.zero_grad()
        loss_of(model, salt + step, rank()).backward()
        second.step()
    grown = hvd.statistics().allreduce_bytes - before
    assert grown == 2 * 8 * sum(p.numel() for p in model.parameters()), grown


def test_a_read_of_param_groups_then_synchronize_averages_once(names, salt):
    """Reading param_groups right after backward waits for the allreduces (GradScaler does);
    an explicit synchronize() after it must not allreduce the averaged gradients again."""
    torch.manual_seed(salt)
    model = Tied()
    opt = wrap(model, names)
    loss_of(model, salt, rank()).backward()
    lr = opt.param_groups[0]["lr"]
    after_read = hvd.statistics().allreduce_bytes
    averaged = [p.grad.clone() for p in model.parameters()]
    opt.synchronize()
    with opt.skip_synchronize():
        opt.step()
    assert lr == 0.1
    assert hvd.statistics().allreduce_bytes == after_read
    assert all(torch.equal(p.grad, g) for p, g in zip(model.parameters(), averaged))
