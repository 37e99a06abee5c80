"""LocalVarianceAdamW: each rank divides its gradient by its own second moment before the
allreduce; step() keeps AdamW's first moment, bias corrections and decoupled weight decay.

Uncompressed, a step equals a reference that every rank computes from every rank's seeded
gradients; 3LC-compressed, parameters stay bitwise identical across ranks; a checkpoint
(optimizer state with this rank's second moments and error-feedback residuals) resumes to the
same bits as a run that never stopped; max_grad_norm clips each rank's own gradient, and then
the allreduces wait for the end of backward.
"""

from __future__ import annotations

import copy

import pytest
import torch

import threelc.torch as hvd
from support.torch_helpers import FEEDBACK, feedback_residuals, gather_rows, rank, size

BETAS, EPS, LR, DECAY = (0.9, 0.95), 1e-8, 0.01, 0.1


def make_model(seed: int = 3) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(4, 128), torch.nn.Tanh(),
                               torch.nn.Linear(128, 128), torch.nn.Tanh(),
                               torch.nn.Linear(128, 2))


def loss_of(model, r: int, step: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(7919 * r + step)
    x, y = torch.randn(8, 4, generator=g), torch.randn(8, 2, generator=g)
    return torch.nn.functional.mse_loss(model(x), y)


def local_gradients(model, r: int, step: int):
    model.zero_grad()
    loss_of(model, r, step).backward()
    return [p.grad.detach().clone() for p in model.parameters()]


def flat(model) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def distributed(model, compression, name: str, max_grad_norm=None):
    opt = hvd.LocalVarianceAdamW(model.parameters(), lr=LR, betas=BETAS, eps=EPS,
                                 weight_decay=DECAY, max_grad_norm=max_grad_norm)
    return hvd.DistributedOptimizer(
        opt, named_parameters=[(f"{name}.{n}", p) for n, p in model.named_parameters()],
        compression=compression)


def reference_steps(steps: int, max_grad_norm=None) -> torch.Tensor:
    """The parameters after `steps` steps, computed in one process from every rank's
    gradients: each rank's own second moment, the mean of the quotients, AdamW's rest."""
    model = make_model()
    params = list(model.parameters())
    second = [[torch.zeros_like(p) for p in params] for _ in range(size())]
    first = [torch.zeros_like(p) for p in params]
    for step in range(steps):
        quotients = []
        for r in range(size()):
            grads = local_gradients(model, r, step)
            if max_grad_norm is not None:
                norm = float(torch.linalg.vector_norm(torch.stack(
                    [torch.linalg.vector_norm(g) for g in grads])))
                grads = [g * min(1.0, max_grad_norm / norm) for g in grads]
            row = []
            for g, v in zip(grads, second[r]):
                v.mul_(BETAS[1]).addcmul_(g, g, value=1 - BETAS[1])
                row.append(g / ((v / (1 - BETAS[1] ** (step + 1))).sqrt() + EPS))
            quotients.append(row)
        with torch.no_grad():
            for i, p in enumerate(params):
                u = torch.stack([row[i] for row in quotients]).mean(0)
                first[i].mul_(BETAS[0]).add_(u, alpha=1 - BETAS[0])
                p.mul_(1 - LR * DECAY)
                p.add_(first[i] / (1 - BETAS[0] ** (step + 1)), alpha=-LR)
    return flat(model)


def train(model, opt, steps, start: int = 0) -> None:
    for step in range(start, start + steps):
        opt.zero_grad()
        loss_of(model, rank(), step).backward()
        opt.step()


@pytest.mark.parametrize("max_grad_norm", [None, 0.05])
def test_uncompressed_steps_equal_the_reference(max_grad_norm):
    model = make_model()
    opt = distributed(model, hvd.Compression.none, f"lv.none.{max_grad_norm}", max_grad_norm)
    train(model, opt, 3)
    expected = reference_steps(3, max_grad_norm)
    assert torch.allclose(flat(model), expected, rtol=1e-5, atol=1e-6), \
        (flat(model) - expected).abs().max()


@pytest.mark.parametrize("max_grad_norm, in_backward", [(1.0, False), (None, True)])
def test_max_grad_norm_defers_the_allreduces_to_the_end_of_backward(max_grad_norm,
                                                                     in_backward):
    """The clip needs every gradient of the rank: with max_grad_norm nothing is submitted
    while backward runs; without it each gradient is submitted from its hook."""
    model = make_model()
    opt = distributed(model, hvd.Compression.none, f"lv.when.{max_grad_norm}", max_grad_norm)
    loss_of(model, rank(), 0).backward()
    submitted = [handle is not None for handle, _ in opt._handles.values()]
    assert len(submitted) == len(list(model.parameters()))
    assert all(submitted) if in_backward else not any(submitted), submitted
    opt.step()


def test_threelc_keeps_ranks_bitwise_identical():
    model = make_model()
    opt = distributed(model, hvd.Compression.threelc, "lv.3lc")
    differing = []
    for step in range(4):
        train(model, opt, 1, start=step)
        rows = gather_rows(flat(model), f"lv.3lc.params{step}")
        differing += [(step, r) for r, row in enumerate(rows) if not torch.equal(row, rows[0])]
    assert not differing, f"parameters differ across ranks (step, rank): {differing}"
    assert torch.isfinite(flat(model)).all()
    if size() > 1:  # the 128x128 layer was quantized: not the uncompressed result
        assert not torch.allclose(flat(model), reference_steps(4), rtol=1e-6, atol=1e-7)


def test_error_feedback_delivers_the_quotients_every_rank_submitted():
    """3LC with error feedback on the quotients: over the steps, the averages each rank
    received, times the ranks, plus every rank's residual, are the sum of the quotients every
    rank submitted (residuals telescope), so what 3LC defers reaches the optimizer later."""
    submitted = {}

    class Recording(hvd.LocalVarianceAdamW):
        def precondition_gradient(self, p, grad):
            quotient = super().precondition_gradient(p, grad)
            submitted[p] = submitted.get(p, 0) + quotient.double()
            return quotient

    model = make_model()
    names = [(f"lv.ef.{n}", p) for n, p in model.named_parameters()]
    opt = hvd.DistributedOptimizer(
        Recording(model.parameters(), lr=LR, betas=BETAS, eps=EPS, weight_decay=DECAY),
        named_parameters=names, compression=hvd.Compression.threelc)
    delivered = {}
    for step in range(5):
        opt.zero_grad()
        loss_of(model, rank(), step).backward()
        opt.synchronize()
        for _, p in names:
            delivered[p] = delivered.get(p, 0) + p.grad.double()
        with opt.skip_synchronize():
            opt.step()
    residuals = feedback_residuals(opt.state_dict()[FEEDBACK])
    compressed = [(name, p) for name, p in names if f"allreduce.{name}" in residuals]
    # the weights (1 KiB and more) are compressed, the biases sent raw
    assert [name for name, _ in compressed] == [f"lv.ef.{i}.weight" for i in (0, 2, 4)] \
        or size() == 1, residuals.keys()
    for name, p in names:
        exact = sum(gather_rows(submitted[p], f"{name}.submitted"))
        left = (sum(gather_rows(residuals[f"allreduce.{name}"].double().reshape(p.shape),
                                f"{name}.residual"))
                if (name, p) in compressed else 0)
        received = delivered[p] * size()
        assert torch.allclose(received + left, exact, rtol=0, atol=1e-4 * exact.abs().max()), \
            (name, (received + left - exact).abs().max())
        if (name, p) in compressed:  # something was deferred: not trivially exact
            assert (received - exact).abs().max() > 1e-3 * exact.abs().max(), name


@pytest.mark.parametrize("compression", ["none", "threelc"])
def test_a_checkpoint_resumes_where_it_stopped(compression):
    """2 steps, state_dict(), 2 more steps; a fresh model and optimizer loaded from the
    checkpoint hold the same moments (and, with 3LC, the same error-feedback residuals), and
    uncompressed take the same 2 steps to the same bits. (With 3LC the engine's fusion of one
    cycle can cut other blocks, so a resumed run is not bitwise the same as one that went on.)"""
    comp = {"none": hvd.Compression.none, "threelc": hvd.Compression.threelc}[compression]
    name = f"lv.ckpt.{compression}"
    model = make_model()
    opt = distributed(model, comp, name)
    train(model, opt, 2)
    saved_model = {k: v.clone() for k, v in model.state_dict().items()}
    saved = copy.deepcopy(opt.state_dict())  # state_dict() shares the live tensors
    state = next(iter(saved["state"].values()))
    assert {"exp_avg", "local_exp_avg_sq", "step", "local_steps"} <= set(state), state.keys()
    train(model, opt, 2, start=2)
    uninterrupted = flat(model)

    resumed = make_model(seed=11)  # other weights: all must come from the checkpoint
    resumed.load_state_dict(saved_model)
    opt2 = distributed(resumed, comp, name)
    opt2.load_state_dict(copy.deepcopy(saved))
    reloaded = opt2.state_dict()
    for key, entry in saved["state"].items():
        for field in ("exp_avg", "local_exp_avg_sq"):
            assert torch.equal(reloaded["state"][key][field], entry[field]), (key, field)
    if compression == "threelc":
        before = feedback_residuals(saved[FEEDBACK])
        after = feedback_residuals(reloaded[FEEDBACK])
        assert before.keys() == after.keys() and before
        assert all(torch.equal(before[k], after[k]) for k in before)
    train(resumed, opt2, 2, start=2)
    if compression == "none":
        assert torch.equal(flat(resumed), uninterrupted), \
            (flat(resumed) - uninterrupted).abs().max()


def test_without_an_allreduce_step_divides_the_gradient_itself():
    """One process, no DistributedOptimizer: the same update as the reference on one rank."""
    model = make_model()
    opt = hvd.LocalVarianceAdamW(model.parameters(), lr=LR, betas=BETAS, eps=EPS,
                                 weight_decay=DECAY)
    reference = make_model()
    v = [torch.zeros_like(p) for p in reference.parameters()]
    m = [torch.zeros_like(p) for p in reference.parameters()]
    for step in range(3):
        opt.zero_grad()
        loss_of(model, 0, step).backward()
        opt.step()
        grads = local_gradients(reference, 0, step)
        with torch.no_grad():
            for p, g, vi, mi in zip(reference.parameters(), grads, v, m):
                vi.mul_(BETAS[1]).addcmul_(g, g, value=1 - BETAS[1])
                mi.mul_(BETAS[0]).add_(g / ((vi / (1 - BETAS[1] ** (step + 1))).sqrt() + EPS),
                                       alpha=1 - BETAS[0])
                p.mul_(1 - LR * DECAY).add_(mi / (1 - BETAS[0] ** (step + 1)), alpha=-LR)
    assert torch.allclose(flat(model), flat(reference), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("kwargs, message", [
    (dict(lr=0), "lr must be > 0"), (dict(betas=(0.9, 1.0)), "betas must be in"),
    (dict(eps=0), "eps must be > 0"), (dict(weight_decay=-1), "weight_decay must be >= 0"),
    (dict(max_grad_norm=0), "max_grad_norm must be > 0"),
])
def test_bad_settings_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        hvd.LocalVarianceAdamW(make_model().parameters(), **kwargs)


def test_sparse_gradients_are_refused():
    embedding = torch.nn.Embedding(10, 4, sparse=True)
    opt = hvd.LocalVarianceAdamW(embedding.parameters())
    embedding(torch.tensor([1, 2])).sum().backward()
    with pytest.raises(ValueError, match="sparse"):
        opt.step()


def test_the_ddp_hook_takes_only_a_local_variance_adamw_as_its_preconditioner():
    with pytest.raises(TypeError, match="LocalVarianceAdamW"):
        hvd.DDPHookState(preconditioner=torch.optim.AdamW(make_model().parameters()))
