"""Mixed precision for the examples (--amp): torch.autocast around the forward pass and, with
float16, a GradScaler.

- ``--amp fp16``: the forward pass autocast to float16, the loss scaled by a
  ``torch.amp.GradScaler`` (on the CPU from torch 2.3 on). A step whose gradients overflow is
  skipped: the averaged gradients are the same on every rank (inf and NaN reach every rank, 3LC
  sends a block holding them raw), so every rank skips it alike and the scale drops on all.
- ``--amp bf16``: the forward pass autocast to bfloat16 (torch 1.13 has it on the CPU too); no
  scaler, since bfloat16 has float32's range.

Parameters and gradients stay float32 either way; the step is the same with threelc.torch's
DistributedOptimizer (the scaler's first read of the optimizer's groups waits for the
allreduces) and with DistributedDataParallel (the hook has averaged the gradients when
backward returns).
"""

from __future__ import annotations

import contextlib
from typing import Optional

import torch

MODES = ("fp16", "bf16")
_DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}


def unsupported(mode: Optional[str]) -> Optional[str]:
    """Why this torch cannot train with `mode` on the CPU (None: it can)."""
    if mode == "fp16" and getattr(getattr(torch, "amp", None), "GradScaler", None) is None:
        return (f"--amp fp16 needs torch 2.3 or later (torch.amp.GradScaler on the CPU); this "
                f"is torch {torch.__version__}: use --amp bf16")
    return None


class MixedPrecision:
    """The forward context and the backward-and-step of one training step in `mode` (None:
    float32 throughout)."""

    def __init__(self, mode: Optional[str]):
        self.mode = mode
        self.skipped_steps = 0  # steps the scaler skipped (their gradients overflowed)
        self.scaler = torch.amp.GradScaler("cpu") if mode == "fp16" else None

    def autocast(self):
        if self.mode is None:
            return contextlib.nullcontext()
        return torch.autocast("cpu", dtype=_DTYPES[self.mode])

    def backward_and_step(self, loss: torch.Tensor, optimizer) -> None:
        if self.scaler is None:
            loss.backward()
            optimizer.step()
            return
        scale = self.scaler.get_scale()
        self.scaler.scale(loss).backward()
        self.scaler.step(optimizer)
        self.scaler.update()
        if self.scaler.get_scale() < scale:
            self.skipped_steps += 1

    def describe(self) -> str:
        return {None: "float32", "fp16": "mixed precision fp16 (GradScaler)",
                "bf16": "mixed precision bf16"}[self.mode]
