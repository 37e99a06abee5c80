"""The constants the Python package mirrors from the C headers agree with them.

ctypes cannot read a header, and the library exports no function that names its enums'
values, so the package writes them down once each (threelc/dtypes.py, threelc/engine/errors.py,
threelc/engine/reduce_ops.py, threelc/engine/compression.py, threelc/engine/abi.py); this test
reads the headers they come from and compares.
"""

from __future__ import annotations

import re
from pathlib import Path

import threelc.dtypes
from threelc.engine import abi, compression, errors, reduce_ops

ROOT = Path(__file__).resolve().parents[3]
CODEC_H = ROOT / "compression" / "include" / "threelc" / "codec.h"
ENGINE_H = ROOT / "engine" / "include" / "threelc" / "threelc.h"
ERRORS_H = ROOT / "compression" / "include" / "threelc" / "error_codes.h"


def enum_values(header: Path, prefix: str) -> dict:
    """{"THREELC_...": value} of every enumerator of `header` whose name starts with `prefix`."""
    text = re.sub(r"/\*.*?\*/", "", header.read_text(), flags=re.S)
    values = {}
    for body in re.findall(r"enum\s*\w*\s*\{(.*?)\}", text, flags=re.S):
        for name, value in re.findall(r"(\w+)\s*=\s*(-?\d+)", body):
            if name.startswith(prefix):
                values[name] = int(value)
    assert values, f"no enumerator {prefix}* in {header}"
    return values


def define_value(header: Path, name: str) -> int:
    match = re.search(rf"#define\s+{name}\s+\(?(-?\d+)\)?", header.read_text())
    assert match, f"no #define {name} in {header}"
    return int(match.group(1))


def test_dtype_numbering_is_the_c_enum():
    c = enum_values(CODEC_H, "THREELC_")
    c = {name: value for name, value in c.items() if not name.startswith(("THREELC_E",
                                                                          "THREELC_OK"))}
    python = {f"THREELC_{name.upper()}": code for name, code in threelc.dtypes.DTYPES.items()}
    assert python == c
    assert list(threelc.dtypes.DTYPES.values()) == sorted(c.values())


def test_error_codes_are_the_c_enums():
    c = {**enum_values(ERRORS_H, "THREELC_E"), **enum_values(ERRORS_H, "THREELC_OK")}
    python = {f"THREELC_{name}": getattr(errors, name)
              for name in errors.__all__ if name.isupper()}
    assert python == c
    assert all(errors.error_name(value) == name for name, value in c.items())


def test_reduce_ops_and_compression_modes_are_the_c_enums():
    ops = enum_values(ENGINE_H, "THREELC_OP_")
    python = {f"THREELC_OP_{name.upper()}": int(getattr(reduce_ops, name))
              for name in reduce_ops.__all__ if name != "ReduceOp"}
    assert python == ops
    assert [int(op) for op in reduce_ops._OPS] == sorted(ops.values())
    modes = enum_values(ENGINE_H, "THREELC_COMPRESSION_")
    assert modes == {"THREELC_COMPRESSION_DEFAULT": compression.Compression.default.mode,
                     "THREELC_COMPRESSION_NONE": compression.Compression.none.mode,
                     "THREELC_COMPRESSION_3LC": compression.Compression.threelc.mode}


def test_limits_are_the_c_defines():
    assert abi.MAX_DIMS == define_value(ENGINE_H, "THREELC_MAX_DIMS")
    assert abi._DEVICE_CPU == define_value(ENGINE_H, "THREELC_DEVICE_CPU")
