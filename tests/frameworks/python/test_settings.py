"""threelc.settings: every layer's declared variables through the C ABI, value() over them, and
one refusal shape for a malformed value wherever it is read (codec, engine, transport)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import threelc
from threelc import settings


def test_every_layer_declares_its_variables_once():
    rows = settings.all_settings()
    names = [row.name for row in rows]
    assert len(names) == len(set(names))
    assert {row.layer for row in rows} == {"engine", "transport", "compression", "python"}
    by_name = {row.name: row for row in rows}
    assert by_name["THREELC_CHUNK_BYTES"].layer == "engine"
    assert by_name["THREELC_CHUNK_BYTES"].type == "bytes"
    assert by_name["THREELC_CHUNK_BYTES"].default == "1048576"
    assert by_name["THREELC_TIMEOUT"].layer == "transport"
    assert by_name["THREELC_CODEC_ISA"].default == "auto"
    for row in rows:
        assert row.accepted and row.meaning, row.name


def test_setting_at_refuses_an_index_out_of_range():
    lib = threelc._library.lib
    settings.library_settings()  # declares the signatures
    out = settings._SettingStruct()
    assert lib.threelc_setting_at(-1, out) == threelc.engine.EINVAL
    assert lib.threelc_setting_at(lib.threelc_setting_count(), out) == threelc.engine.EINVAL
    assert "is not in [0, " in threelc.engine.last_error()


def test_value_is_the_environment_else_the_declared_default(monkeypatch):
    monkeypatch.delenv("THREELC_START_TIMEOUT", raising=False)
    assert settings.value("THREELC_START_TIMEOUT") == "60"
    monkeypatch.setenv("THREELC_START_TIMEOUT", "")
    assert settings.value("THREELC_START_TIMEOUT") == "60"
    monkeypatch.setenv("THREELC_START_TIMEOUT", "7.5")
    assert settings.value("THREELC_START_TIMEOUT") == "7.5"
    with pytest.raises(KeyError, match="THREELC_NO_SUCH"):
        settings.value("THREELC_NO_SUCH")


def _run(script: str, **variables: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, **variables)
    for name in ("THREELC_RANK", "THREELC_SIZE", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "RANK"):
        env.pop(name, None)
    return subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, timeout=60)


_ENCODE = """
import numpy as np, threelc.codec as codec
try:
    codec.compress(np.ones(64, np.float32))
except Exception as e:
    print("refused:", e)
"""

_INIT = """
import threelc.engine as engine
try:
    engine.init()
except Exception as e:
    print("refused:", e)
else:
    engine.shutdown()
    print("started")
"""


def test_a_malformed_codec_isa_is_refused_by_the_codec_and_by_init():
    refusal = "THREELC_CODEC_ISA='avx1024' is not accepted: expected auto, scalar, avx2 or avx512"
    encoded = _run(_ENCODE, THREELC_CODEC_ISA="avx1024")
    assert refusal in encoded.stdout, encoded.stdout + encoded.stderr
    started = _run(_INIT, THREELC_CODEC_ISA="avx1024")
    assert refusal in started.stdout, started.stdout + started.stderr
    assert "started" in _run(_INIT, THREELC_CODEC_ISA="Scalar").stdout


@pytest.mark.parametrize("name, value, accepted", [
    ("THREELC_CHUNK_BYTES", "4098", "a multiple of 4"),                 # engine
    ("THREELC_TIMEOUT", "soon", "a number of seconds > 0"),             # transport
    ("THREELC_MAX_MESSAGE_BYTES", "-1", "an integer number of bytes"),  # transport
])
def test_every_layer_refuses_in_one_shape(name, value, accepted):
    started = _run(_INIT, **{name: value})
    assert f"threelc: {name}='{value}' is not accepted: expected" in started.stdout, \
        started.stdout + started.stderr
    assert accepted in started.stdout
