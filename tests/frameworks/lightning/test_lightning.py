"""PyTorch Lightning with the threelc hook: examples/train_fashion_mnist_lightning.py, cut short
(2 processes, 15 steps), started by Lightning's own launcher (``Trainer(devices=2)`` starts the
second process) and by torch 2's torchrun.

``Trainer(strategy=DDPStrategy(ddp_comm_hook=threelc.torch.ddp_comm_hook,
ddp_comm_state=threelc.torch.DDPHookState()))`` must train with the gradients going through the
engine, 3LC-compressed: the engine's own statistics show the bytes and the compression (a
strategy that dropped the hook, as Lightning's own does on the CPU, sends nothing through the
engine and fails here), and 15 steps beat chance (10 classes) on the test set.

Run in the torch 2 virtual environment (tools/torch2_venv.sh), from the repository root:
    PYTHONPATH=frameworks/python build/venv-torch2/bin/python -m pytest -q \
        tests/frameworks/lightning
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import pytorch_lightning  # noqa: F401 (the suite needs it: build/venv-torch2 has it)

from support.paths import REPO, with_python_package
from support.rank_jobs import JobOptions, run_job

DATA = Path("/usr/share/datasets/fashion-mnist")
EXAMPLE = REPO / "examples" / "train_fashion_mnist_lightning.py"
TORCHRUN = Path(sys.executable).parent / "torchrun"

pytestmark = pytest.mark.skipif(not DATA.is_dir(),
                                reason=f"{DATA} missing (dataset-fashion-mnist)")


def run_example(launcher: list, *args: str) -> dict:
    """Runs the example under `launcher`; the JSON object of rank 0's last line."""
    env = with_python_package(dict(os.environ))
    command = [*launcher, EXAMPLE, "--devices", "2", "--epochs", "1", "--max-steps", "15",
               *args]
    job = run_job(command, JobOptions(env=env, timeout=300, scale_timeout=False,
                                      prefixed=False))
    assert job.returncode == 0, f"{job.name} exited {job.returncode}:\n{job.stderr[-4000:]}"
    return job.json_result(0)


def check_trained_through_the_engine(summary: dict) -> None:
    assert summary["hook"] == "threelc" and summary["ranks"] == 2, summary
    assert summary["steps"] == 15, summary
    assert 0.3 < summary["test_accuracy"] <= 1.0, summary
    # The engine carried the gradients (its own count), 3LC-compressed: measured about 30x.
    assert summary["engine_mb_sent_per_rank"] > 0, summary
    assert summary["compression_ratio"] > 10, summary


def test_lightnings_launcher_trains_with_the_threelc_hook():
    """Lightning starts the second process itself: the engine takes its ranks from
    torch.distributed's group (no launcher variable names them)."""
    summary = run_example([sys.executable])
    check_trained_through_the_engine(summary)
    assert (summary["precision"], summary["logits_dtype"]) == ("32-true", "float32"), summary


def test_torchrun_trains_with_the_threelc_hook_in_bf16():
    """Under torch 2's torchrun (unmended), with precision='bf16-mixed'."""
    summary = run_example([TORCHRUN, "--standalone", "--nproc_per_node", "2"], "--amp", "bf16")
    check_trained_through_the_engine(summary)
    assert (summary["precision"], summary["logits_dtype"]) == ("bf16-mixed", "bfloat16"), summary
