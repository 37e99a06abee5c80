"""The transformer examples cut short: a GPT-2 (Hugging Face transformers) trained with AdamW on
the Python documentation's text, 2 ranks, a few steps.

train_transformer.py (Horovod's API, under threelcrun) and its DistributedDataParallel twin
train_transformer_ddp.py (under torchrun) must print progress and validation losses and end
with one JSON object; the compression ratio must be about 1 without compression and large
with 3LC; a few steps must already bring the validation loss well under that of a uniform
guess over 256 bytes (ln 256 = 5.55 nats). They need transformers, which build/venv-torch2 has
(ctest's example_tests_torch2 runs them there); Debian's torch 1.13 python skips them.

Run: PYTHONPATH=frameworks/python build/venv-torch2/bin/python -m pytest -q tests/examples
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from support.paths import REPO, THREELCRUN, with_python_package
from support.rank_jobs import JobOptions, run_job as run_ranks

pytest.importorskip("transformers", reason="transformers is not installed (build/venv-torch2 "
                                           "has it: tools/torch2_venv.sh)")

PYTHON = sys.executable
TORCHRUN = Path(PYTHON).parent / "torchrun"
TEXT = Path("/usr/share/doc/python3/html/_sources")
needs_text = pytest.mark.skipif(not TEXT.is_dir(), reason=f"{TEXT} missing (python3-doc)")
SHORT = ["--steps", "12", "--log-every", "4", "--eval-every", "6", "--val-windows", "16"]
UNIFORM_LOSS = math.log(256)


def run_job(cmd: list, prefixed: bool) -> tuple[dict, str]:
    env = with_python_package(dict(os.environ))
    job = run_ranks(cmd, JobOptions(env=env, timeout=300, scale_timeout=False,
                                    prefixed=prefixed))
    assert job.returncode == 0, f"{job.name} exited {job.returncode}:\n{job.stderr}"
    return job.json_result(0), job.stdout


def run_optimizer_example(*args: str) -> tuple[dict, str]:
    return run_job([THREELCRUN, "-np", "2", PYTHON, REPO / "examples" / "train_transformer.py",
                    *SHORT, *args], prefixed=True)


def run_ddp_example(*args: str) -> tuple[dict, str]:
    return run_job([TORCHRUN, "--standalone", "--nproc_per_node", "2",
                    REPO / "examples" / "train_transformer_ddp.py", *SHORT, *args],
                   prefixed=False)


def check_common(summary: dict, stdout: str) -> None:
    assert "step 4/12" in stdout and "step 12/12" in stdout, stdout
    assert "step 6: validation loss" in stdout and "step 12: validation loss" in stdout, stdout
    assert summary["ranks"] == 2 and summary["steps"] == 12, summary
    assert [p["step"] for p in summary["curve"]] == [6, 12], summary
    assert summary["val_loss"] == summary["curve"][-1]["val_loss"], summary
    seconds = [p["seconds"] for p in summary["curve"]]  # training time, validations left out
    assert 0 < seconds[0] < seconds[1] <= summary["train_seconds"], summary
    assert summary["val_loss"] < UNIFORM_LOSS - 0.5, summary
    assert summary["perplexity"] == pytest.approx(math.exp(summary["val_loss"]), rel=1e-3)
    assert summary["parameters"] == 1853568 and summary["model"] == "small", summary
    assert summary["lr"] == 3e-3 and summary["clip"] == 1.0 and summary["warmup"] == 1, summary


@needs_text
@pytest.mark.parametrize("compression", ["threelc", "none"])
def test_optimizer_example_trains_and_reports(compression):
    summary, stdout = run_optimizer_example("--compression", compression)
    check_common(summary, stdout)
    assert "GPT-2 small (1853568 parameters)" in stdout, stdout
    assert summary["api"] == "DistributedOptimizer" and summary["compression"] == compression
    assert summary["bytes_sent_per_rank"] > 0, summary
    if compression == "none":
        assert 0.95 < summary["compression_ratio"] < 1.05, summary
        assert "scale_tile" not in summary, summary
    else:
        assert summary["compression_ratio"] > 15, summary
        assert summary["sparsity"] == 1.0 and summary["scale_tile"] == 320, summary


@needs_text
def test_optimizer_example_trains_with_local_variance_adamw():
    """--optimizer local-variance-adamw: threelc.torch.LocalVarianceAdamW under
    DistributedOptimizer, 3LC-compressed; it clips each rank's gradient itself."""
    summary, stdout = run_optimizer_example("--optimizer", "local-variance-adamw")
    check_common(summary, stdout)
    assert "local-variance-adamw" in stdout, stdout
    assert summary["optimizer"] == "local-variance-adamw", summary
    assert summary["compression_ratio"] > 15, summary


@needs_text
def test_ddp_example_trains_with_local_variance_adamw_through_the_hook():
    """--optimizer local-variance-adamw under DDP: DDPHookState(preconditioner=optimizer)
    divides each gradient before 3LC; with clipping the hook holds the buckets until the
    last one."""
    summary, stdout = run_ddp_example("--optimizer", "local-variance-adamw")
    check_common(summary, stdout)
    assert summary["optimizer"] == "local-variance-adamw" and summary["hook"] == "threelc"
    assert summary["compression_ratio"] > 15, summary


@needs_text
def test_local_variance_adamw_is_the_same_training_through_both_apis(monkeypatch):
    """Uncompressed (THREELC_COMPRESSION=none for the hook), LocalVarianceAdamW under
    DistributedOptimizer and under DDP with the hook train alike to the last digit printed."""
    optimizer, _ = run_optimizer_example("--compression", "none",
                                         "--optimizer", "local-variance-adamw")
    monkeypatch.setenv("THREELC_COMPRESSION", "none")
    ddp, _ = run_ddp_example("--optimizer", "local-variance-adamw")
    assert optimizer["val_loss"] == pytest.approx(ddp["val_loss"], abs=1e-4), (optimizer, ddp)


@needs_text
@pytest.mark.parametrize("hook", ["threelc", "none"])
def test_ddp_example_trains_and_reports(hook):
    summary, stdout = run_ddp_example("--hook", hook)
    check_common(summary, stdout)
    assert summary["api"] == "ddp" and summary["hook"] == hook, summary
    # 2 (N-1)/N x 1,853,568 float32 gradients x 12 steps at 2 ranks
    assert summary["ring_mb_per_rank"] == pytest.approx(1853568 * 4 * 12 / 1e6, abs=1e-3)
    if hook == "none":
        assert 0.95 < summary["compression_ratio"] < 1.02, summary
        assert summary["engine_mb_sent_per_rank"] is None, summary
    else:
        assert summary["compression_ratio"] > 15, summary
        assert 0 < summary["engine_mb_sent_per_rank"] <= summary["mb_sent_per_rank"], summary
        assert summary["sparsity"] == 1.0 and summary["scale_tile"] == 320, summary


@needs_text
def test_both_apis_train_on_the_same_batches_from_the_same_start():
    """Uncompressed, the two APIs are the same training: the same model, batches, AdamW and
    clipping, so their validation losses agree closely (summation order differs)."""
    optimizer, _ = run_optimizer_example("--compression", "none")
    ddp, _ = run_ddp_example("--hook", "none")
    assert optimizer["val_loss"] == pytest.approx(ddp["val_loss"], abs=2e-3), (optimizer, ddp)


@pytest.mark.parametrize("example", ["train_transformer.py", "train_transformer_ddp.py"])
@pytest.mark.parametrize("bad, message", [
    (["--lr", "0"], "--lr 0.0 must be positive"),
    (["--steps", "0"], "--steps must be at least 1"),
    (["--warmup", "20", "--steps", "10"], "--warmup 20 must be in [0, --steps)"),
    (["--model", "huge"], "invalid choice: 'huge'"),
])
def test_examples_refuse_bad_arguments(example, bad, message):
    proc = subprocess.run([PYTHON, str(REPO / "examples" / example), *bad],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO / "frameworks" / "python")})
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr


def test_corpus_refuses_a_directory_without_text(tmp_path):
    sys.path.insert(0, str(REPO / "examples"))
    import text_lm  # noqa: PLC0415

    with pytest.raises(FileNotFoundError, match="python3-doc"):
        text_lm.load_corpus(tmp_path)
