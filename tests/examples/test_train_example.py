"""The training examples (the README's main job), cut short: 2 ranks, 15 steps, both modes.

train_fashion_mnist.py (Horovod's API, under threelcrun) and its DistributedDataParallel twin
train_fashion_mnist_ddp.py (under torchrun, with and without the threelc hook) must print
progress, a per-epoch line and a last line that is one JSON object; the compression ratio they
report must be about 1 without compression (which checks its definition: the bytes an
uncompressed allreduce sends over the bytes really sent) and large with 3LC; 15 steps must
already beat chance (10 classes) on the test set.

The examples run with the python that runs this suite: Debian's /usr/bin/python3 (torch 1.13;
the DDP twin under tools/torchrun, torch 1.13's torchrun mended) or build/venv-torch2's (torch
2.13; the DDP twin under that torch's own torchrun), as ctest's example_tests and
example_tests_torch2 run it.

Run: PYTHONPATH=frameworks/python /usr/bin/python3 -m pytest -q tests/examples
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from support.paths import REPO, THREELCRUN, TORCHRUN as MENDED_TORCHRUN, with_python_package
from support.rank_jobs import JobOptions, run_job as run_ranks

DATA = Path("/usr/share/datasets/fashion-mnist")
PYTHON = sys.executable
TORCH2 = int(torch.__version__.split(".")[0]) >= 2
# torch 2's torchrun runs as it is; torch 1.13's needs tools/torchrun under Python 3.11.
TORCHRUN = Path(PYTHON).parent / "torchrun" if TORCH2 else MENDED_TORCHRUN
# CPU float16 autocast with a GradScaler (--amp fp16): torch 2.3 and later.
CPU_GRAD_SCALER = getattr(getattr(torch, "amp", None), "GradScaler", None) is not None


def run_job(cmd: list, prefixed: bool = False) -> tuple[dict, str]:
    """Runs a job's launcher command; (the JSON object of rank 0's last line, stdout). Rank 0's
    lines carry threelcrun's "[0] " where `prefixed` (torchrun's: every line, since only rank 0
    prints)."""
    env = with_python_package(dict(os.environ))
    job = run_ranks(cmd, JobOptions(env=env, timeout=300, scale_timeout=False,
                                    prefixed=prefixed))
    assert job.returncode == 0, f"{job.name} exited {job.returncode}:\n{job.stderr}"
    assert job.lines[0], job.stdout
    return job.json_result(0), job.stdout


def run_example(*args: str) -> tuple[dict, str]:
    return run_job([THREELCRUN, "-np", "2", PYTHON,
                    REPO / "examples" / "train_fashion_mnist.py", "--epochs", "1",
                    "--max-steps", "15", "--log-every", "5", *args], prefixed=True)


@pytest.mark.skipif(not DATA.is_dir(), reason=f"{DATA} missing (dataset-fashion-mnist)")
@pytest.mark.parametrize("compression", ["threelc", "none"])
def test_example_trains_and_reports(compression):
    summary, stdout = run_example("--compression", compression)
    assert "step 5/15" in stdout and "step 15/15" in stdout, stdout
    assert "epoch 1: loss" in stdout and "test accuracy" in stdout, stdout
    assert summary["ranks"] == 2 and summary["steps"] == 15
    assert summary["compression"] == compression
    assert summary["test_accuracy"] > 0.3, summary
    assert summary["seconds"] > 0 and summary["bytes_sent_per_rank"] > 0
    if compression == "none":
        assert 0.95 < summary["compression_ratio"] < 1.05, summary
    else:
        assert summary["compression_ratio"] > 20, summary


@pytest.mark.skipif(not DATA.is_dir(), reason=f"{DATA} missing (dataset-fashion-mnist)")
def test_example_trains_the_mlp():
    """--model mlp: the second model, 3LC-compressed at the engine's defaults, at its own best
    learning rate (0.2, the CNN's is 0.05) unless --lr is given."""
    summary, stdout = run_example("--model", "mlp")
    assert "MLP (669706 parameters)" in stdout, stdout
    assert summary["model"] == "mlp" and summary["steps"] == 15, summary
    assert summary["lr"] == 0.2, summary
    assert summary["test_accuracy"] > 0.3, summary
    assert summary["compression_ratio"] > 10, summary


@pytest.mark.skipif(not DATA.is_dir(), reason=f"{DATA} missing (dataset-fashion-mnist)")
def test_example_trains_the_wide_mlp_with_fp16():
    """--model wide (the communication-bound model) with Horovod's fp16: float16 gradients sent
    raw, so half the bytes of the float32 allreduce; the CNN's default learning rate is not
    the wide model's."""
    summary, stdout = run_example("--model", "wide", "--compression", "fp16", "--max-steps", "5")
    assert "WIDE (11882506 parameters)" in stdout, stdout
    assert summary["compression"] == "fp16" and summary["sparsity"] is None, summary
    assert 1.9 < summary["compression_ratio"] < 2.05, summary
    assert summary["lr"] != 0.05, summary


@pytest.mark.skipif(not DATA.is_dir(), reason=f"{DATA} missing (dataset-fashion-mnist)")
@pytest.mark.parametrize("amp", ["fp16", "bf16"])
def test_example_trains_in_mixed_precision(amp):
    """--amp: the forward pass autocast to fp16 (with a GradScaler: scaler.step() on the
    DistributedOptimizer) or bf16; the float32 gradients travel 3LC-compressed as without it."""
    if amp == "fp16" and not CPU_GRAD_SCALER:
        pytest.skip(f"torch {torch.__version__} has no GradScaler on the CPU (torch 2.3+)")
    summary, stdout = run_example("--amp", amp)
    assert f"mixed precision {amp}" in stdout, stdout
    assert summary["amp"] == amp and summary["steps"] == 15, summary
    assert summary["test_accuracy"] > 0.3, summary
    assert summary["compression_ratio"] > 20, summary
    # A step the scaler skips is skipped on every rank; most steps must still train.
    assert 0 <= summary["amp_skipped_steps"] <= (5 if amp == "fp16" else 0), summary


@pytest.mark.skipif(CPU_GRAD_SCALER, reason="this torch has a CPU GradScaler")
@pytest.mark.parametrize("example", ["train_fashion_mnist.py", "train_fashion_mnist_ddp.py"])
def test_example_refuses_fp16_amp_without_a_cpu_grad_scaler(example):
    proc = subprocess.run([PYTHON, str(REPO / "examples" / example), "--amp"],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO / "frameworks" / "python")})
    assert proc.returncode == 2 and "--amp fp16 needs torch 2.3" in proc.stderr, proc.stderr


@pytest.mark.parametrize("example", ["train_fashion_mnist.py", "train_fashion_mnist_ddp.py"])
def test_example_refuses_a_learning_rate_that_is_not_positive(example):
    proc = subprocess.run([PYTHON, str(REPO / "examples" / example), "--lr", "0"],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO / "frameworks" / "python")})
    assert proc.returncode == 2 and "--lr 0.0 must be positive" in proc.stderr, proc.stderr


@pytest.mark.parametrize("example", ["train_fashion_mnist.py", "train_fashion_mnist_ddp.py"])
def test_example_refuses_a_bad_sparsity(example):
    proc = subprocess.run([PYTHON, str(REPO / "examples" / example),
                           "--sparsity", "2.5"], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO / "frameworks" / "python")})
    assert proc.returncode == 2 and "--sparsity 2.5 is outside [1, 2)" in proc.stderr


# ------------------------------------------------------------- DistributedDataParallel twin

def run_ddp_example(*args: str) -> tuple[dict, str]:
    return run_job([TORCHRUN, "--standalone", "--nproc_per_node", "2",
                    REPO / "examples" / "train_fashion_mnist_ddp.py", "--epochs", "1",
                    "--max-steps", "15", "--log-every", "5", *args])


@pytest.mark.skipif(not DATA.is_dir(), reason=f"{DATA} missing (dataset-fashion-mnist)")
@pytest.mark.parametrize("hook", ["threelc", "none"])
def test_ddp_example_trains_and_reports(hook):
    summary, stdout = run_ddp_example("--hook", hook)
    assert "step 5/15" in stdout and "step 15/15" in stdout, stdout
    assert "epoch 1: loss" in stdout and "test accuracy" in stdout, stdout
    assert summary["hook"] == hook and summary["ranks"] == 2 and summary["steps"] == 15
    assert math.isfinite(summary["test_loss"]) and summary["test_loss"] > 0, summary
    assert 0.3 < summary["test_accuracy"] <= 1.0, summary
    assert summary["seconds"] > 0 and summary["seconds_per_epoch"] > 0, summary
    assert summary["mb_sent_per_rank"] > 0, summary
    # The computed figure: 2 (N-1)/N x 322,138 float32 gradients x 15 steps.
    assert summary["ring_mb_per_rank"] == pytest.approx(322138 * 4 * 15 / 1e6, abs=1e-3)
    if hook == "none":
        # gloo's allreduce is a ring: it sends the computed figure plus its framing and DDP's
        # few control messages (measured 0.2% over 15-40 steps, at 2 and 4 ranks). A ratio
        # above 1 would mean the count misses bytes (the gloo socket carries nearly all of
        # them); 5% below leaves room for overhead yet catches a socket counted twice (0.5).
        assert 0.95 < summary["compression_ratio"] < 1.02, summary
        assert summary["engine_mb_sent_per_rank"] is None
    else:
        # Measured 49-55x here (the engine's negotiation with rank 0 included); > 5 only checks
        # that the gradients went through the engine, compressed, and not through gloo.
        assert summary["compression_ratio"] > 5, summary
        assert summary["sparsity"] == 1.0
        # The engine's own count is part of what the kernel saw this process send.
        assert 0 < summary["engine_mb_sent_per_rank"] <= summary["mb_sent_per_rank"], summary


@pytest.mark.skipif(not DATA.is_dir(), reason=f"{DATA} missing (dataset-fashion-mnist)")
@pytest.mark.parametrize("hook, ratio", [("fp16", (1.9, 2.02)), ("powersgd", (2.0, 1000))])
def test_ddp_example_runs_torchs_compression_hooks(hook, ratio):
    """The peers a user has without threelc: torch's fp16 hook halves gloo's bytes; PowerSGD
    (rank 1, after 5 uncompressed steps, one bucket: torch 1.13 over gloo fails with several)
    sends far fewer once it starts."""
    extra = ["--powersgd-rank", "1", "--powersgd-start-step", "5",
             "--bucket-cap-mb", "1000"] if hook == "powersgd" else []
    summary, stdout = run_ddp_example("--hook", hook, *extra)
    assert summary["hook"] == hook and summary["steps"] == 15, summary
    assert summary["engine_mb_sent_per_rank"] is None, summary
    assert 0.3 < summary["test_accuracy"] <= 1.0, summary
    assert ratio[0] < summary["compression_ratio"] < ratio[1], summary
    if hook == "powersgd":
        assert summary["powersgd_rank"] == 1 and summary["bucket_cap_mb"] == 1000, summary
        assert "PowerSGD hook, rank 1" in stdout, stdout


@pytest.mark.skipif(not DATA.is_dir(), reason=f"{DATA} missing (dataset-fashion-mnist)")
def test_ddp_example_trains_in_mixed_precision_through_the_hook():
    """--amp bf16 through the threelc hook (the step is the Horovod-style example's, whose
    fp16 run above covers the GradScaler; tests/frameworks/ddp runs one through the hook)."""
    summary, stdout = run_ddp_example("--hook", "threelc", "--amp", "bf16")
    assert "mixed precision bf16" in stdout, stdout
    assert summary["amp"] == "bf16" and summary["hook"] == "threelc", summary
    assert 0.3 < summary["test_accuracy"] <= 1.0, summary
    assert summary["compression_ratio"] > 5, summary
    assert summary["amp_skipped_steps"] == 0, summary


def test_ddp_example_refuses_a_powersgd_start_it_cannot_use():
    proc = subprocess.run([PYTHON, str(REPO / "examples" / "train_fashion_mnist_ddp.py"),
                           "--hook", "powersgd", "--powersgd-start-step", "1"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "--powersgd-start-step 1 must be at least 2" in proc.stderr
