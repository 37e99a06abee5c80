"""threelc.torch.ddp_comm_hook under DistributedDataParallel (gloo, CPU), on every rank.

Each rank trains on its own rank-seeded data; expected values are computed locally or
gathered over gloo. Bounds come from tests/support/torch_helpers.py (3LC's one-step and drift
bounds for a sum; an average is the sum over n).
"""

from __future__ import annotations

import copy
import os
import time

import pytest
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

import threelc.engine as engine
import threelc.torch as hvd
from support.ddp_helpers import gather
from support.mixed_precision import bits
from support.torch_helpers import drift_bound_sum, feedback_residuals, first_bound_sum

MIN_COMPRESS_BYTES = 1024  # THREELC_MIN_COMPRESS_BYTES default
BUCKET_CAP_MB = 0.15  # several buckets for the model below


def make_net(seed: int) -> nn.Module:
    """Two weights of 128 KiB (compressed) and small tensors that travel raw."""
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(128, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(),
                         nn.Linear(128, 10))


def batch(step: int, rank: int):
    g = torch.Generator().manual_seed(1000 * step + rank)
    return torch.randn(16, 128, generator=g), torch.randint(0, 10, (16,), generator=g)


def hooked(net: nn.Module, tag: str = "", **state_options):
    """`net` in DDP with the threelc hook; `tag` names its operations apart from other
    tests' (empty: the hook's own names)."""
    model = DDP(net, bucket_cap_mb=BUCKET_CAP_MB)
    if tag:
        state_options["named_parameters"] = [(f"{tag}/{n}", p) for n, p in net.named_parameters()]
    state = hvd.DDPHookState(**state_options)
    model.register_comm_hook(state, hvd.ddp_comm_hook)
    return model, state


def backward(model: nn.Module, step: int) -> None:
    x, y = batch(step, dist.get_rank())
    nn.functional.cross_entropy(model(x), y).backward()


def local_grads(seed: int, steps) -> list:
    """Per step, this rank's own gradients of make_net(seed) (no DDP)."""
    net = make_net(seed)
    out = []
    for step in steps:
        net.zero_grad()
        x, y = batch(step, dist.get_rank())
        nn.functional.cross_entropy(net(x), y).backward()
        out.append([p.grad.clone() for p in net.parameters()])
    return out


def global_max(t: torch.Tensor) -> float:
    m = t.abs().max().reshape(1).clone()
    dist.all_reduce(m, op=dist.ReduceOp.MAX)
    return float(m)


def flat(module: nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1) for p in module.parameters()])


def compressed(p: torch.Tensor) -> bool:
    return p.numel() * p.element_size() >= MIN_COMPRESS_BYTES


def restart_engine(**variables) -> None:
    """A fresh engine (empty residuals), with THREELC_* `variables` set (None: unset)."""
    hvd.shutdown()
    for key, value in variables.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    hvd.init()


# --------------------------------------------------------------------------------- tests

def test_the_engine_joined_through_torchrun_and_torchs_store():
    assert hvd.size() == dist.get_world_size() and hvd.rank() == dist.get_rank()
    secrets = [None] * dist.get_world_size()
    dist.all_gather_object(secrets, os.environ.get("THREELC_SECRET"))
    if dist.get_world_size() > 1:
        assert secrets[0] and len(set(secrets)) == 1


def test_one_step_matches_ddps_default_allreduce_within_the_3lc_bound():
    model, _ = hooked(make_net(1), tag="one_step")
    plain = DDP(make_net(1), bucket_cap_mb=BUCKET_CAP_MB)
    sent_before = hvd.statistics().wire_bytes_sent
    backward(model, 0)
    sent = hvd.statistics().wire_bytes_sent - sent_before
    backward(plain, 0)
    (own,) = local_grads(1, [0])
    n, lossy = dist.get_world_size(), 0
    grad_bytes = 0
    for p, q, g in zip(model.parameters(), plain.parameters(), own):
        error = (p.grad - q.grad).abs().max().item()
        grad_bytes += p.grad.numel() * 4
        if compressed(p):
            bound = first_bound_sum(n, 1.0, global_max(g)) / n * (1 + 1e-5)
            assert error <= bound, f"{tuple(p.shape)}: error {error} > bound {bound}"
            lossy += error > 0
        else:
            torch.testing.assert_close(p.grad, q.grad, rtol=1e-6, atol=1e-7)
    if n > 1:
        assert lossy > 0, "nothing was quantized: the hook did not compress"
        # A ring allreduce of raw floats sends 2 (n-1)/n of the gradients per rank.
        assert sent < 0.25 * 2 * (n - 1) / n * grad_bytes


def test_parameters_stay_bitwise_identical_across_ranks():
    model, _ = hooked(make_net(2), tag="identical")
    start = flat(model).clone()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for step in range(30):
        optimizer.zero_grad()
        backward(model, step)
        optimizer.step()
        everyone = gather(flat(model))
        for r, other in enumerate(everyone):
            assert torch.equal(bits(other), bits(everyone[0])), f"step {step}: rank {r} differs"
    assert not torch.equal(flat(model), start)


def test_error_feedback_follows_parameters_when_ddp_rebuilds_its_buckets():
    model = DDP(make_net(3), bucket_cap_mb=BUCKET_CAP_MB)
    state = hvd.DDPHookState()  # the hook's own names: bucket and position first seen
    layouts = []

    def recording(hook_state, bucket):
        layouts[-1].append((bucket.index(), tuple(id(p) for p in bucket.parameters())))
        return hvd.ddp_comm_hook(hook_state, bucket)

    model.register_comm_hook(state, recording)
    names = []
    for step in range(3):
        layouts.append([])
        backward(model, step)
        names.append({id(p): state._names[p] for p in model.parameters()})
    assert sorted(layouts[0]) != sorted(layouts[1]), "DDP did not rebuild its buckets"
    assert layouts[1] == layouts[2]
    assert names[0] == names[1] == names[2]
    expected = {state._names[p]: p.numel() for p in model.parameters() if compressed(p)}
    if dist.get_world_size() > 1:
        residuals = feedback_residuals(state.state_dict()["error_feedback"])
        assert {name: r.numel() for name, r in residuals.items()} == expected


def test_a_non_finite_bucket_reaches_every_rank_and_the_next_step_is_clean():
    model, _ = hooked(make_net(4), tag="non_finite")
    plain = DDP(make_net(4), bucket_cap_mb=BUCKET_CAP_MB)
    first, third = model.module[0].weight, model.module[4].weight
    rank, n = dist.get_rank(), dist.get_world_size()

    def poison(grad, value, at, on_rank):
        if rank != on_rank:
            return grad
        grad = grad.clone()
        grad[at] = value
        return grad

    handles = [first.register_hook(lambda g: poison(g, float("inf"), (0, 0), 0)),
               third.register_hook(lambda g: poison(g, float("nan"), (1, 1), n - 1))]
    backward(model, 0)
    for h in handles:
        h.remove()
    assert first.grad[0, 0].item() == float("inf")
    assert torch.isnan(third.grad[1, 1])
    finite = torch.isfinite(flat_grads(model))
    assert int((~finite).sum()) == 2  # what GradScaler checks: it skips this step
    everyone = gather(flat_grads(model))
    assert all(torch.equal(bits(e), bits(everyone[0])) for e in everyone)

    # The next step: nothing non-finite stayed behind in the error feedback.
    model.zero_grad()
    backward(model, 1)
    backward(plain, 1)
    own = local_grads(4, [0, 1])
    for i, (p, q) in enumerate(zip(model.parameters(), plain.parameters())):
        assert torch.isfinite(p.grad).all()
        if compressed(p):
            x = max(global_max(own[0][i]), global_max(own[1][i]))
            bound = 2 * drift_bound_sum(n, 1.0, x) / n * (1 + 1e-5)
            assert (p.grad - q.grad).abs().max().item() <= bound


def flat_grads(model: nn.Module) -> torch.Tensor:
    return torch.cat([p.grad.reshape(-1) for p in model.parameters()])


@pytest.mark.parametrize("options", [{"gradient_as_bucket_view": True},
                                     {"static_graph": True}], ids=["bucket_view", "static_graph"])
def test_the_hook_under_ddps_bucket_options(options):
    """gradient_as_bucket_view (each p.grad a view into its bucket: the hook's in-place result
    is the gradient) and static_graph (DDP's other bucket path): within the 3LC bound of DDP's
    default allreduce, parameters bitwise identical across ranks after 4 steps."""
    net = make_net(12)
    model = DDP(net, bucket_cap_mb=BUCKET_CAP_MB, **options)
    state = hvd.DDPHookState(named_parameters=[(f"options/{n}", p)
                                               for n, p in net.named_parameters()])
    model.register_comm_hook(state, hvd.ddp_comm_hook)
    plain = DDP(make_net(12), bucket_cap_mb=BUCKET_CAP_MB)
    backward(model, 0)
    backward(plain, 0)
    (own,) = local_grads(12, [0])
    n = dist.get_world_size()
    errors = []
    for p, q, g in zip(model.parameters(), plain.parameters(), own):
        bound = first_bound_sum(n, 1.0, global_max(g)) / n * (1 + 1e-5) if compressed(p) \
            else 1e-6 * global_max(g)
        errors += [tuple(p.shape)] if (p.grad - q.grad).abs().max().item() > bound else []
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    train(model, optimizer, range(1, 5))
    everyone = gather(flat(model))
    assert not errors, f"gradients past the bound: {errors}"
    assert all(torch.equal(bits(e), bits(everyone[0])) for e in everyone)


def test_small_tensors_travel_raw_and_match_ddp():
    model, _ = hooked(make_net(5), tag="raw", min_compress_bytes=1 << 30)
    plain = DDP(make_net(5), bucket_cap_mb=BUCKET_CAP_MB)
    backward(model, 0)
    backward(plain, 0)
    for p, q in zip(model.parameters(), plain.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-6, atol=1e-7)


def test_ranks_that_disagree_fail_the_backward_on_every_rank():
    if dist.get_world_size() < 2:
        pytest.skip("needs 2 ranks")
    sparsity = 1.0 if dist.get_rank() == 0 else 1.5
    model, _ = hooked(make_net(6), tag="disagree", sparsity=sparsity)
    with pytest.raises(RuntimeError, match="ranks disagree on compression"):
        backward(model, 0)


def test_a_bucket_past_its_timeout_fails_the_backward_naming_the_tensor():
    """Rank 0 gives buckets 0.3 s; rank 1 hands its buckets over 1 s late. Rank 0's backward
    raises (ETIMEOUT, naming the operation) instead of waiting; rank 1's completes once rank 0's
    submissions, which still run, meet its own."""
    if dist.get_world_size() < 2:
        pytest.skip("needs 2 ranks")
    rank = dist.get_rank()
    net = make_net(10)
    model = DDP(net, bucket_cap_mb=BUCKET_CAP_MB)
    state = hvd.DDPHookState(named_parameters=[(f"timeout/{n}", p) for n, p in
                                               net.named_parameters()],
                             timeout=0.3 if rank == 0 else None)

    def late(hook_state, bucket):
        if rank == 1:
            time.sleep(1.0)
        return hvd.ddp_comm_hook(hook_state, bucket)

    model.register_comm_hook(state, late)
    if rank == 0:
        with pytest.raises(RuntimeError, match=r"allreduce 'ddp\.timeout/.*still pending"):
            backward(model, 0)
    else:
        backward(model, 0)


# --------------------------------------------------------------------------- checkpoints

def train(model: nn.Module, optimizer, steps) -> None:
    for step in steps:
        optimizer.zero_grad()
        backward(model, step)
        optimizer.step()


def fresh_job(seed: int):
    """What a (re)started job builds: model, optimizer, hook state (the hook's own names)."""
    model, state = hooked(make_net(seed))
    return model, torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9), state


def test_a_resumed_job_continues_bit_for_bit(tmp_path):
    """Train 6 steps, checkpoint, train 6 more; a fresh engine restored from the checkpoint
    repeats those 6 steps bit for bit, and one that skips the residuals does not.
    Fusion is off: which tensors a cycle fuses depends on timing, and 3LC's blocks on the
    fusion, so only unfused runs are reproducible bit for bit."""
    restart_engine(THREELC_FUSION_THRESHOLD="0")
    try:
        model, optimizer, state = fresh_job(7)
        train(model, optimizer, range(6))
        path = tmp_path / f"checkpoint.rank{dist.get_rank()}.pt"
        torch.save({"model": model.module.state_dict(), "optimizer": optimizer.state_dict(),
                    "hook": state.state_dict()}, path)
        train(model, optimizer, range(6, 12))
        uninterrupted = flat(model).clone()

        def resume(restore_feedback: bool) -> torch.Tensor:
            restart_engine()
            checkpoint = torch.load(path)
            model, optimizer, state = fresh_job(8)
            model.module.load_state_dict(checkpoint["model"])
            optimizer.load_state_dict(checkpoint["optimizer"])
            if restore_feedback:
                state.load_state_dict(checkpoint["hook"])
            train(model, optimizer, range(6, 12))
            return flat(model).clone()

        assert torch.equal(bits(resume(True)), bits(uninterrupted))
        if dist.get_world_size() > 1:  # one rank quantizes nothing: no residuals
            assert not torch.equal(resume(False), uninterrupted), \
                "the residuals made no difference: the test cannot tell a restore from none"
    finally:
        restart_engine(THREELC_FUSION_THRESHOLD=None)


def test_a_state_saved_while_the_engine_is_down_holds_no_residuals_and_restores_nothing():
    """state_dict() is collective-free (rank 0 alone may checkpoint): it never starts the
    engine, and what it saved then (no residuals) loads as a no-op."""
    _, state = hooked(make_net(10), tag="down")
    hvd.shutdown()
    try:
        saved = state.state_dict()
        started = engine.is_initialized()
    finally:
        hvd.init()
    assert saved["error_feedback"] is None and not started
    state.load_state_dict(saved)


def test_another_ranks_or_a_damaged_checkpoint_is_refused_and_changes_nothing():
    model, state = hooked(make_net(9), tag="refuse")
    backward(model, 0)
    mine = state.state_dict()
    n = dist.get_world_size()
    everyone = [None] * n
    dist.all_gather_object(everyone, mine["error_feedback"])
    if n > 1:
        other = dict(mine, error_feedback=everyone[(dist.get_rank() + 1) % n])
        with pytest.raises(hvd.ThreelcError) as refused:
            state.load_state_dict(other)
        assert refused.value.code == engine.EINVAL
    damaged = mine["error_feedback"].clone()
    damaged[0] ^= 0xFF  # the magic
    with pytest.raises(hvd.ThreelcError) as malformed:
        state.load_state_dict(dict(mine, error_feedback=damaged))
    assert malformed.value.code == engine.EMALFORMED
    truncated = mine["error_feedback"][:-3].clone()
    with pytest.raises(hvd.ThreelcError):
        state.load_state_dict(dict(mine, error_feedback=truncated))
    assert torch.equal(state.state_dict()["error_feedback"], mine["error_feedback"])
    copy.deepcopy(mine)  # a state_dict is plain data
