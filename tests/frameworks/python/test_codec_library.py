"""threelc.codec's library loading (THREELC_LIBRARY) and kernel selection
(THREELC_CODEC_ISA), each in a fresh interpreter."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import threelc._library
from support.paths import PYTHON_PACKAGE


# --------------------------------------------------------------------------------------
# Library loading and kernel selection (fresh interpreters).


def _python(code: str, **env_overrides):
    env = dict(os.environ)
    env["PYTHONPATH"] = str(PYTHON_PACKAGE) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(env_overrides)
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=120)


def test_threelc_library_missing_file(tmp_path):
    missing = tmp_path / "nowhere" / "libthreelc.so"
    proc = _python("import threelc.codec", THREELC_LIBRARY=str(missing))
    assert proc.returncode != 0
    assert "ImportError" in proc.stderr
    assert str(missing) in proc.stderr
    assert "THREELC_LIBRARY" in proc.stderr


def test_threelc_library_not_a_library(tmp_path):
    bogus = tmp_path / "libthreelc.so"
    bogus.write_text("not an ELF file")
    proc = _python("import threelc.codec", THREELC_LIBRARY=str(bogus))
    assert proc.returncode != 0
    assert str(bogus) in proc.stderr and "could not be loaded" in proc.stderr


def test_threelc_library_override_loads():
    lib_path = Path(threelc._library.path).resolve()
    proc = _python("import threelc, threelc._library as l; print(l.path, threelc.__version__)",
                   THREELC_LIBRARY=str(lib_path))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [str(lib_path), threelc.__version__]


_ISA_SCRIPT = """
import hashlib, numpy as np
from threelc import codec
rng = np.random.default_rng(13)
h = hashlib.sha256()
for n in (1, 5, 4097, 20480, 20481, 70001):
    for s in (1.0, 1.5):
        x = (rng.standard_cauchy(n) * 1e-3).astype(np.float32)
        e = (rng.standard_normal(n) * 1e-4).astype(np.float32)
        h.update(codec.compress(x, e, sparsity=s)); h.update(e.tobytes())
        b = codec.compress(x.astype(np.float16), e)
        d = codec.decompress(b); h.update(b); h.update(d.tobytes())
        acc = np.ones(n, np.float32); codec.decompress_add(b, acc, 0.5); h.update(acc.tobytes())
print(codec.isa(), h.hexdigest())
"""


def test_every_isa_produces_identical_bytes():
    """Blocks, errors and decodes are bit-identical across the kernel sets this CPU runs."""
    results = {}
    for isa in ("scalar", "avx2", "avx512"):
        proc = _python(_ISA_SCRIPT, THREELC_CODEC_ISA=isa)
        assert proc.returncode == 0, proc.stderr
        used, digest = proc.stdout.split()
        if used == isa:
            results[isa] = digest
    assert "scalar" in results
    assert len(set(results.values())) == 1, results
