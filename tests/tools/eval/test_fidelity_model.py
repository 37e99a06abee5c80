"""The fidelity model (tools/eval/accuracy/fidelity_model.py) against the codec it models.

docs/ACCURACY.md splits 3LC's accuracy loss into its parts with that one-process model, so its
quantizer and its byte counts must be the codec's: same decoded values, same residuals, same
block sizes, over repeated steps that carry the residual; and its push_pull must conserve
every value (what was sent plus what the residuals hold is what went in).

Run: PYTHONPATH=frameworks/python /usr/bin/python3 -m pytest -q \\
    tests/tools/eval/test_fidelity_model.py
"""

from __future__ import annotations

import sys

import numpy as np
import pytest

from support.paths import REPO
from threelc import codec

torch = pytest.importorskip("torch")

sys.path.insert(0, str(REPO / "tools" / "eval" / "accuracy"))
import fidelity_model as model  # noqa: E402


@pytest.mark.parametrize("count", [1, 7, 1000, 20480, 20481, 75264])
def test_quantizer_and_block_size_are_the_codecs(count):
    rng = np.random.default_rng(count)
    args = model.parse_args([])
    error = np.zeros(count, np.float32)
    model_error = torch.zeros(count)
    for _ in range(5):  # the residual carries from step to step
        x = (rng.standard_normal(count) ** 3).astype(np.float32)
        block = codec.compress(x, residual=error, sparsity=1.0)
        decoded, model_error = model.quantize(torch.from_numpy(x) + model_error, 1.0, 0, args)
        assert np.array_equal(codec.decompress(block), decoded.numpy())
        assert np.array_equal(error, model_error.numpy())
        assert len(block) == model.block_bytes(decoded, 0)


@pytest.mark.parametrize("ranks", [2, 3, 4])
def test_push_pull_conserves_every_value(ranks):
    args = model.parse_args(["--ranks", str(ranks)])
    sizes = [301, 5000, 17]
    pp = model.PushPull(sizes, ranks, args)
    rng = torch.Generator().manual_seed(ranks)
    sent = torch.zeros(sum(sizes), dtype=torch.float64)
    given = torch.zeros(sum(sizes), dtype=torch.float64)
    for _ in range(20):
        grads = torch.randn(ranks, sum(sizes), generator=rng) ** 3
        given += grads.sum(0).double()
        sent += pp.sum(grads).double()
    held = pp.push_error.sum(0).double() + pp.pull_error.double()
    assert torch.allclose(sent + held, given, rtol=0, atol=1e-3)
    summary = pp.summary()
    assert 0 < summary["push_density"] < 1 and 0 < summary["pull_density"] < 1
    assert summary["compression_ratio"] > 1
