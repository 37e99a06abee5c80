"""The training example (the README's main job), cut short: 2 ranks, 15 steps, both modes.

It must print progress, a per-epoch line and a last line that is one JSON object; the
compression ratio it reports must be about 1 without compression (which checks its
definition: the bytes an uncompressed push_pull sends over the bytes really sent) and large
with 3LC; 15 steps must already beat chance (10 classes) on the test set.

Run: PYTHONPATH=frameworks/python /usr/bin/python3 -m pytest -q tests/examples
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
DATA = Path("/usr/share/datasets/fashion-mnist")


def run_example(*args: str) -> tuple[dict, str]:
    cmd = [str(REPO / "tools" / "threelcrun"), "-np", "2", PYTHON,
           str(REPO / "examples" / "train_fashion_mnist.py"), "--epochs", "1",
           "--max-steps", "15", "--log-every", "5", *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stderr}"
    lines = [line for line in proc.stdout.splitlines() if line.startswith("[0] ")]
    assert lines, proc.stdout
    return json.loads(lines[-1][4:]), proc.stdout


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


def test_example_refuses_a_bad_sparsity():
    proc = subprocess.run([PYTHON, str(REPO / "examples" / "train_fashion_mnist.py"),
                           "--sparsity", "2.5"], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO / "frameworks" / "python")})
    assert proc.returncode == 2 and "--sparsity 2.5 is outside [1, 2)" in proc.stderr
