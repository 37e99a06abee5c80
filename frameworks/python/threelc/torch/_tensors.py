"""Torch tensors in and out of the engine binding (:mod:`threelc.engine`), which takes numpy.

Nothing here is compiled against torch: a CPU tensor reaches the engine as a numpy view of its
own memory (``tensor.numpy()``), so in-place operations write into the tensor itself. bfloat16,
which numpy lacks, travels as its int16 bit patterns with ``dtype="bfloat16"``; bool is the
engine's own element type (moved, never reduced). A CUDA tensor
reaches allreduce as a device pointer with its stream (:func:`cuda_allreduce_ready`) when the
engine takes CUDA tensors; other collectives, and allreduce where the engine cannot (no CUDA in
the build, no device), stage it through a host copy. A non-contiguous tensor is staged through
a contiguous copy.
"""

from __future__ import annotations

import warnings
from typing import Optional, Tuple

import numpy as np
import torch

from .. import engine as _engine

# The engine's element types (threelc_dtype), as torch dtypes of the same names.
SUPPORTED_DTYPES = tuple(getattr(torch, name) for name in _engine.DTYPES)
_EXPECTED = ", ".join(str(dtype) for dtype in SUPPORTED_DTYPES if dtype != torch.bool)


def check_tensor(tensor, what: str = "tensor", reducing: bool = False) -> torch.Tensor:
    """`tensor` if the engine takes it. bool tensors can be broadcast, gathered and exchanged,
    but not reduced (`reducing`), as the engine's bool type."""
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"{what} must be a torch.Tensor, got {type(tensor).__name__}")
    if tensor.dtype == torch.bool:
        if reducing:
            raise TypeError(f"{what} has dtype torch.bool, which threelc does not reduce: it "
                            f"broadcasts, gathers and exchanges bool tensors (convert to uint8 "
                            f"or int32 to reduce)")
        return tensor
    if tensor.dtype not in SUPPORTED_DTYPES:
        raise TypeError(f"{what} has dtype {tensor.dtype}, which threelc does not take; "
                        f"expected one of {_EXPECTED} (torch.bool too where nothing is "
                        f"reduced)")
    if tensor.is_sparse:
        raise TypeError(f"{what} is sparse; threelc reduces dense tensors (call "
                        f".to_dense() first)")
    return tensor


def array_of(tensor: torch.Tensor) -> Tuple[np.ndarray, Optional[str]]:
    """(numpy view of a contiguous CPU tensor's memory, the engine dtype name or None)."""
    t = tensor.detach()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy(), "bfloat16"
    return t.numpy(), None


def tensor_of(array: np.ndarray, dtype: torch.dtype) -> torch.Tensor:
    """A torch tensor over `array`'s memory (bfloat16 from its int16 bit patterns)."""
    t = torch.from_numpy(array)
    if dtype == torch.bfloat16:
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


_cuda_reason: Optional[str] = None  # None: not asked yet; "": CUDA tensors go to the engine


def cuda_allreduce_ready(tensor: torch.Tensor) -> bool:
    """Whether allreduce hands `tensor` (on a CUDA device) to the engine as device memory.
    Where the engine cannot take CUDA tensors, warns once why and returns False: the tensor is
    then staged through host memory."""
    global _cuda_reason
    if tensor.device.type != "cuda":
        return False
    if _cuda_reason is None:
        _cuda_reason = _engine.cuda_unavailable_reason()
        if _cuda_reason:
            warnings.warn(f"threelc: CUDA tensors are staged through host memory: "
                          f"{_cuda_reason}", RuntimeWarning, stacklevel=3)
    return _cuda_reason == ""


def engine_dtype(dtype: torch.dtype) -> str:
    """The engine's name of a reducible torch dtype ("float32", "bfloat16", ...)."""
    return str(dtype).rsplit(".", 1)[-1]


class DeviceWork:
    """The contiguous CUDA tensor the engine works on for `tensor`, and the way back: the
    tensor itself when contiguous, else a contiguous copy on the same device."""

    __slots__ = ("original", "work")

    def __init__(self, tensor: torch.Tensor):
        self.original = tensor
        t = tensor.detach()
        self.work = t if t.is_contiguous() else t.contiguous()

    def submit(self, out: torch.Tensor, **kwargs):
        """threelc.engine.allreduce_device of `work` into `out` (same shape, dtype, device),
        ready on the current stream of the tensor's device."""
        w = self.work
        stream = torch.cuda.current_stream(w.device).cuda_stream
        return _engine.allreduce_device(w.data_ptr(), out.data_ptr(), tuple(w.shape),
                                        engine_dtype(w.dtype), w.device.index, stream,
                                        keep=(w, out), **kwargs)

    def copy_back(self) -> torch.Tensor:
        """After an in-place allreduce of `work`: the original tensor, holding the result."""
        if self.work.data_ptr() != self.original.data_ptr():
            with torch.no_grad():
                self.original.copy_(self.work)
        return self.original
