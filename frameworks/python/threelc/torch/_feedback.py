"""The engine's error-feedback residuals as a checkpointable tensor.

3LC's error feedback is per-rank state kept in the engine (one float32 residual per compressed
operation name). :func:`save` takes this rank's residuals under a name prefix as one blob (the
engine's format, docs/WIRE_FORMAT.md, which records the rank and job size it belongs to) in a
uint8 tensor, so ``torch.save`` stores it like any other state; :func:`load` gives it back to
the engine, which refuses a blob of another rank or job size, or a damaged one, and changes
nothing then.
"""

from __future__ import annotations

import torch

from .. import engine as _engine


def save(prefix: str) -> torch.Tensor:
    """This rank's residuals whose names start with `prefix`, as a uint8 tensor."""
    return torch.frombuffer(bytearray(_engine.feedback_save(prefix)), dtype=torch.uint8)


def load(blob, prefix: str) -> None:
    """Replaces this rank's residuals under `prefix` by those of `blob` (from :func:`save`)."""
    if isinstance(blob, torch.Tensor):
        if blob.dtype != torch.uint8 or blob.dim() != 1:
            raise TypeError(f"error-feedback state must be the 1-d uint8 tensor state_dict() "
                            f"made, got {blob.dtype} of shape {tuple(blob.shape)}")
        raw = blob.cpu().numpy().tobytes()
    else:
        raw = bytes(blob)
    _engine.feedback_load(raw, prefix)
