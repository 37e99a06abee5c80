"""What every case of worker.py shares: this rank, the checks that fail a case, the lines it
prints for the pytest side (HASH, STAT)."""

from __future__ import annotations

import hashlib
import os
import re

import numpy as np

from threelc import engine
from threelc.engine import ThreelcError


RANK = int(os.environ.get("THREELC_RANK", "0"))
SIZE = int(os.environ.get("THREELC_SIZE", "1"))


class Fail(Exception):
    pass


def check(condition, message):
    if not condition:
        raise Fail(message() if callable(message) else message)


def out(line):
    print(line, flush=True)


def digest(array) -> str:
    a = np.ascontiguousarray(array)
    h = hashlib.sha256()
    h.update(f"{a.dtype.str}{a.shape}".encode())
    h.update(memoryview(a).cast("B") if a.size else b"")
    return h.hexdigest()[:32]


def emit(key, array):
    out(f"HASH {key} {digest(array)}")


def first_difference(got, want):
    got = np.asarray(got)
    want = np.asarray(want)
    if got.shape != want.shape:
        return f"shape {got.shape}, expected {want.shape}"
    if got.dtype != want.dtype:
        return f"dtype {got.dtype}, expected {want.dtype}"
    g = got.reshape(-1)
    w = want.reshape(-1)
    both_nan = np.isnan(g.astype(np.float64)) & np.isnan(w.astype(np.float64))
    bad = np.nonzero(~((g == w) | both_nan))[0]
    if bad.size == 0:
        return None
    i = int(bad[0])
    return (f"{bad.size} of {g.size} elements differ; first at flat index {i}: got {g[i]!r}, "
            f"expected {w[i]!r}")


def expect_equal(got, want, what):
    diff = first_difference(got, want)
    check(diff is None, lambda: f"{what}: {diff}")


def expect_error(fn, code, what, *needles):
    """Calls fn(); it must raise ThreelcError with `code` whose message contains every needle
    (str: substring, case-insensitive; re.Pattern: search). Returns the message."""
    try:
        fn()
    except ThreelcError as e:
        message, got = str(e), e.code
    else:
        raise Fail(f"{what}: no error was raised (expected {engine.error_name(code)})")
    check(got == code, lambda: f"{what}: error code {got} ({engine.error_name(got)}), expected "
                               f"{code} ({engine.error_name(code)}); message: {message}")
    for needle in needles:
        if isinstance(needle, re.Pattern):
            ok = needle.search(message) is not None
        else:
            ok = needle.lower() in message.lower()
        shown = getattr(needle, "pattern", needle)
        check(ok, lambda: f"{what}: message does not mention {shown!r}: {message}")
    return message


def names_rank(r):
    """Pattern: the message names rank r ("rank 2", "ranks 0, 2", "ranks 1 and 2", "rank=2")."""
    return re.compile(rf"\branks?\b[\s:=#]*(?:\d+\s*(?:,|and|-|/)\s*)*{r}\b", re.IGNORECASE)
