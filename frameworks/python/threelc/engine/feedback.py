"""3LC error-feedback checkpoints: this rank's residuals as one blob
(threelc_feedback_save) and back (threelc_feedback_load); the blob's layout is in
docs/WIRE_FORMAT.md."""

from __future__ import annotations

import ctypes
from typing import Optional

from .abi import _check, _fn

__all__ = ["feedback_save", "feedback_load"]


def _prefix_bytes(prefix: Optional[str]) -> bytes:
    if prefix is None:
        return b""
    if not isinstance(prefix, str):
        raise TypeError(f"prefix must be a str, got {type(prefix).__name__}")
    raw = prefix.encode("utf-8")
    if b"\0" in raw:
        raise ValueError(f"prefix {prefix!r} contains a NUL character")
    return raw


def feedback_save(prefix: str = "") -> bytes:
    """This rank's 3LC error feedback (the residuals of every compressed tensor whose name
    starts with `prefix`; "" for all) as one blob for a checkpoint (threelc_feedback_save;
    layout in docs/WIRE_FORMAT.md).

    Save between steps (after waiting for a step's allreduces, before submitting the next) on
    every rank, and :func:`feedback_load` each rank's own blob after restarting: the job then
    continues bit for bit. A compressed allreduce in progress is waited for, never seen halfway.
    Raises ThreelcError (ENOTINIT before init(); EINVAL for a name the blob cannot hold).
    """
    raw = _prefix_bytes(prefix)
    fn = _fn("threelc_feedback_save")
    needed = _check(int(fn(raw, None, 0)), "threelc_feedback_save")
    while True:
        buffer = bytearray(needed)
        window = (ctypes.c_char * needed).from_buffer(buffer)
        length = _check(int(fn(raw, window, needed)), "threelc_feedback_save")
        del window  # releases the bytearray's export
        if length <= needed:
            return bytes(buffer) if length == needed else bytes(memoryview(buffer)[:length])
        needed = length  # a tensor's first compressed step added a residual meanwhile


def feedback_load(blob: bytes, prefix: str = "") -> None:
    """Replaces this rank's error feedback under `prefix` ("" for all) by `blob`, which
    :func:`feedback_save` returned on this rank of a job of this size (threelc_feedback_load).
    Residuals under the prefix that the blob lacks are dropped; the rest are kept.

    Raises ThreelcError with the engine's message and code: EINVAL for a blob of another rank
    or job size, or holding a name outside `prefix`; EMALFORMED for a damaged blob (naming the
    field and byte offset); ENOTINIT before init(). Nothing changes when it raises.
    """
    if not isinstance(blob, (bytes, bytearray, memoryview)):
        raise TypeError(f"blob must be bytes, got {type(blob).__name__}")
    raw = _prefix_bytes(prefix)
    data = blob if isinstance(blob, bytes) else bytes(blob)
    _check(_fn("threelc_feedback_load")(raw, data, len(data)), "threelc_feedback_load")
