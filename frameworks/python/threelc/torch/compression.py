"""Compression choices for threelc.torch, with Horovod's interface and 3LC added.

As in Horovod, a compressor has ``compress(tensor) -> (tensor, ctx)`` and
``decompress(tensor, ctx) -> tensor``, applied in Python around the allreduce. threelc adds
``engine``: what the engine does with the tensor on the wire (a
:class:`threelc.engine.WireCompression`):

- ``Compression.none``: nothing; the tensor travels raw and the result is exact.
- ``Compression.fp16``: floating tensors are cast to float16 before the allreduce and back
  after it (Horovod's fp16); the engine sends the float16 values raw.
- ``Compression.threelc``: the engine's 3LC allreduce (push_pull), with error feedback kept in
  the engine under the tensor's name; ``Compression.threelc(sparsity=1.25)`` sets the sparsity
  multiplier s for those tensors (default THREELC_SPARSITY, 1.0). Only float tensors of at
  least THREELC_MIN_COMPRESS_BYTES reduced with Sum or Average are quantized; others go raw.
- ``Compression.default``: THREELC_COMPRESSION decides (3LC unless it is ``none``). The
  default of :class:`DistributedOptimizer`.

Any object with Horovod's static ``compress``/``decompress`` (a user's own compressor class)
is accepted too; its output then travels raw.
"""

from __future__ import annotations

from typing import Optional

import torch

from .. import engine as _engine


class Compressor:
    """Interface of a compressor (Horovod's), plus the engine's wire compression."""

    engine = _engine.Compression.none

    @staticmethod
    def compress(tensor: torch.Tensor):
        return tensor, None

    @staticmethod
    def decompress(tensor: torch.Tensor, ctx):
        return tensor


class NoneCompressor(Compressor):
    """Default Horovod compressor: nothing is changed, the tensor travels raw."""

    engine = _engine.Compression.none

    def __repr__(self) -> str:
        return "Compression.none"


class FP16Compressor(Compressor):
    """Floating tensors travel as float16 (cast back after the allreduce)."""

    engine = _engine.Compression.none

    @staticmethod
    def compress(tensor: torch.Tensor):
        if tensor.dtype.is_floating_point and tensor.dtype != torch.float16:
            return tensor.to(torch.float16), tensor.dtype
        return tensor, None

    @staticmethod
    def decompress(tensor: torch.Tensor, ctx):
        return tensor if ctx is None else tensor.to(ctx)

    def __repr__(self) -> str:
        return "Compression.fp16"


class ThreelcCompressor(Compressor):
    """3LC in the engine; call it to choose the sparsity: ``Compression.threelc(sparsity=1.1)``
    (without one, or as ``Compression.threelc``, THREELC_SPARSITY decides: 1.0 by default)."""

    def __init__(self, sparsity: Optional[float] = None):
        if sparsity is not None:
            sparsity = float(sparsity)
            if not 1.0 <= sparsity < 2.0:
                raise ValueError(f"sparsity {sparsity}: the 3LC sparsity multiplier must be in "
                                 f"[1, 2)")
        self.sparsity = sparsity
        self.engine = _engine.Compression.threelc(sparsity=sparsity)

    def __call__(self, sparsity: Optional[float] = None) -> "ThreelcCompressor":
        return ThreelcCompressor(sparsity)

    def __repr__(self) -> str:
        tail = "" if self.sparsity is None else f"(sparsity={self.sparsity})"
        return f"Compression.threelc{tail}"


class DefaultCompressor(Compressor):
    """What THREELC_COMPRESSION (and THREELC_SPARSITY) say: 3LC unless set to none."""

    engine = _engine.Compression.default

    def __repr__(self) -> str:
        return "Compression.default"


class Compression:
    """The compression choices (``hvd.Compression.none``, ``.fp16``, ``.threelc``,
    ``.default``)."""

    none = NoneCompressor()
    fp16 = FP16Compressor()
    threelc = ThreelcCompressor()
    default = DefaultCompressor()


def engine_compression(compression) -> "_engine.WireCompression":
    """The wire compression of `compression` (raw for compressors without one)."""
    if compression is None:
        return _engine.Compression.none
    wire = getattr(compression, "engine", None)
    return wire if isinstance(wire, _engine.WireCompression) else _engine.Compression.none


def check_compressor(compression) -> None:
    if compression is None:
        return
    if not (callable(getattr(compression, "compress", None))
            and callable(getattr(compression, "decompress", None))):
        raise TypeError(f"compression {compression!r} has no compress()/decompress(); use "
                        f"Compression.none, Compression.fp16 or Compression.threelc")
