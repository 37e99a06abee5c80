"""Torch tensors in and out of the engine binding (:mod:`threelc.engine`), which takes numpy.

Nothing here is compiled against torch: a CPU tensor reaches the engine as a numpy view of its
own memory (``tensor.numpy()``), so in-place operations write into the tensor itself. bfloat16,
which numpy lacks, travels as its int16 bit patterns with ``dtype="bfloat16"``. A tensor on
another device (CUDA) is staged through a host copy until the engine takes device pointers
(the GPU issue); a non-contiguous tensor is staged through a contiguous copy.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from typing import Optional, Tuple

import numpy as np
import torch

# The engine's eight element types (threelc_dtype), as torch dtypes.
SUPPORTED_DTYPES = (torch.uint8, torch.int8, torch.int32, torch.int64, torch.float16,
                    torch.bfloat16, torch.float32, torch.float64)


def check_tensor(tensor, what: str = "tensor", reducing: bool = False) -> torch.Tensor:
    """`tensor` if the engine takes it. bool tensors travel as bytes: they can be broadcast,
    gathered and exchanged, but not reduced (`reducing`)."""
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"{what} must be a torch.Tensor, got {type(tensor).__name__}")
    if tensor.dtype == torch.bool:
        if reducing:
            raise TypeError(f"{what} is a bool tensor: threelc broadcasts, gathers and "
                            f"exchanges bool tensors but does not reduce them (convert to "
                            f"uint8 or int32 first)")
        return tensor
    if tensor.dtype not in SUPPORTED_DTYPES:
        raise TypeError(f"{what} has dtype {tensor.dtype}, which threelc does not reduce; "
                        f"expected one of uint8, int8, int32, int64, float16, bfloat16, "
                        f"float32, float64")
    if tensor.is_sparse:
        raise TypeError(f"{what} is sparse; threelc reduces dense tensors (call "
                        f".to_dense() first)")
    return tensor


_unnamed_bool_ops = defaultdict(itertools.count)  # kind -> counter


def wire_name(name: Optional[str], tensor: torch.Tensor, kind: str) -> Optional[str]:
    """The name `tensor`'s operation travels under. A bool tensor travels as uint8 bytes, so
    its name is tagged ("#bool"; unnamed ones are numbered apart) to keep a bool tensor on one
    rank from matching a uint8 tensor on another: that disagreement then fails like any other
    (a name submitted by some ranks only, after THREELC_STALL_TIMEOUT)."""
    if tensor.dtype != torch.bool:
        return name
    if name:
        return f"{name}#bool"
    return f"{kind}.noname.bool.{next(_unnamed_bool_ops[kind])}"


def array_of(tensor: torch.Tensor) -> Tuple[np.ndarray, Optional[str]]:
    """(numpy view of a contiguous CPU tensor's memory, the engine dtype name or None)."""
    t = tensor.detach()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy(), "bfloat16"
    if t.dtype == torch.bool:
        return t.view(torch.uint8).numpy(), None
    return t.numpy(), None


def tensor_of(array: np.ndarray, dtype: torch.dtype) -> torch.Tensor:
    """A torch tensor over `array`'s memory (bfloat16 from its int16 bit patterns)."""
    t = torch.from_numpy(array)
    if dtype in (torch.bfloat16, torch.bool):
        return t.view(dtype)
    return t


class HostStage:
    """The CPU, contiguous tensor the engine works on for `tensor`, and the way back.

    For a contiguous CPU tensor that is the tensor itself (nothing is copied); otherwise a
    host copy whose result ``back()`` copies into `tensor` (in place) or returns on `tensor`'s
    device (out of place).
    """

    __slots__ = ("original", "host")

    def __init__(self, tensor: torch.Tensor):
        self.original = tensor
        t = tensor.detach()
        if t.device.type != "cpu":
            t = t.to("cpu")
        self.host = t if t.is_contiguous() else t.contiguous()

    @property
    def staged(self) -> bool:
        return self.host.data_ptr() != self.original.data_ptr() or \
            self.original.device.type != "cpu"

    def to_device(self, result: torch.Tensor) -> torch.Tensor:
        device = self.original.device
        return result if device.type == "cpu" else result.to(device)

    def copy_back(self) -> torch.Tensor:
        """After an in-place operation on `host`: the original tensor, holding the result."""
        if self.staged:
            with torch.no_grad():
                self.original.copy_(self.host)
        return self.original
