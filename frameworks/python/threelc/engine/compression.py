"""How the engine compresses one allreduce on the wire: :class:`WireCompression`
(``threelc_compression`` plus a sparsity) and the :class:`Compression` choices, in the manner
of Horovod's ``hvd.Compression``. (threelc.torch has Horovod's own kind of choice: its
``Compression`` members are compressors, each carrying a WireCompression as ``engine``.)
The mode numbers mirror ``threelc_compression`` in threelc/threelc.h
(tests/frameworks/python/test_abi_constants.py checks them)."""

from __future__ import annotations

from typing import NamedTuple, Optional

__all__ = ["WireCompression", "Compression"]

# threelc_compression
_COMPRESSION_DEFAULT = 0
_COMPRESSION_NONE = 1
_COMPRESSION_3LC = 2


class WireCompression(NamedTuple):
    """How the engine compresses one allreduce on the wire: ``mode`` (threelc_compression)
    and ``sparsity`` (the 3LC multiplier s in [1, 2); None follows THREELC_SPARSITY).

    ``Compression.threelc`` is a WireCompression; calling it sets the sparsity:
    ``Compression.threelc(sparsity=1.25)``.
    """

    mode: int
    sparsity: Optional[float] = None

    def __call__(self, sparsity: Optional[float] = None) -> "WireCompression":
        return self._replace(sparsity=sparsity)

    def __repr__(self) -> str:
        name = {0: "default", 1: "none", 2: "threelc"}.get(self.mode, str(self.mode))
        tail = "" if self.sparsity is None else f"(sparsity={self.sparsity})"
        return f"Compression.{name}{tail}"


class Compression:
    """Compression choices for allreduce, in the manner of Horovod's ``hvd.Compression``.

    - ``Compression.default``: follow THREELC_COMPRESSION (3LC unless it says ``none``);
    - ``Compression.none``: send this tensor raw;
    - ``Compression.threelc``: 3LC (optionally ``Compression.threelc(sparsity=s)``).

    Only float tensors of at least THREELC_MIN_COMPRESS_BYTES reduced with Sum or Average are
    ever compressed; for anything else the choice has no effect.
    """

    default = WireCompression(_COMPRESSION_DEFAULT)
    none = WireCompression(_COMPRESSION_NONE)
    threelc = WireCompression(_COMPRESSION_3LC)


def mode_and_sparsity(compression, sparsity: Optional[float]) -> tuple:
    """(threelc_compression, sparsity float with 0 = follow THREELC_SPARSITY) of a
    Compression member, a name ("default", "none", "threelc", "3lc") or None, with
    `sparsity` (when given) overriding the member's."""
    if compression is None:
        mode, s = _COMPRESSION_DEFAULT, None
    elif isinstance(compression, WireCompression):
        mode, s = compression.mode, compression.sparsity
    elif isinstance(compression, str):
        table = {"default": _COMPRESSION_DEFAULT, "none": _COMPRESSION_NONE,
                 "threelc": _COMPRESSION_3LC, "3lc": _COMPRESSION_3LC}
        if compression.lower() not in table:
            raise ValueError(f"compression {compression!r}: expected one of "
                             f"{', '.join(table)} or a Compression member")
        mode, s = table[compression.lower()], None
    else:
        raise TypeError(f"compression must be a Compression member, a string or None, got "
                        f"{compression!r}")
    if sparsity is not None:
        s = sparsity
    return mode, (0.0 if s is None else float(s))
