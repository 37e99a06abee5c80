"""numpy bindings of the 3LC codec (block format v1, see docs/WIRE_FORMAT.md).

    >>> import numpy as np, threelc.codec as codec
    >>> x = np.random.randn(1000).astype(np.float32)
    >>> r = np.zeros_like(x)                    # residual: error-feedback memory, in place
    >>> block = codec.compress(x, r)            # bytes: 16-byte header, tile table, tiles
    >>> y = codec.decompress(block)             # float32; y + r == x bit for bit
    >>> codec.inspect(block)
    BlockInfo(count=1000, format=1, scale=...)

Every function validates its arguments in Python (TypeError for a wrong kind of object or
dtype, ValueError for a wrong shape, layout or length) and turns a failure of the C library
into a :class:`CodecError` (a ValueError) carrying the library's message.
"""

from __future__ import annotations

import ctypes
import warnings
from typing import NamedTuple, Optional, Union

import numpy as np

from ._library import lib
from .dtypes import NUMPY_CODES
from .engine.errors import EMALFORMED

__all__ = [
    "CodecError",
    "BlockInfo",
    "FORMAT_RAW",
    "FORMAT_3LC",
    "compress",
    "compress_raw",
    "decompress",
    "decompress_add",
    "inspect",
    "isa",
    "max_block_bytes",
]

FORMAT_RAW = 0
FORMAT_3LC = 1

# The dtypes the codec encodes, with their threelc_dtype codes.
_DTYPES = {dt: NUMPY_CODES[dt] for dt in (np.dtype(np.float16), np.dtype(np.float32))}
_SIZE_MAX = ctypes.c_size_t(-1).value

Buffer = Union[bytes, bytearray, memoryview, np.ndarray]


class CodecError(ValueError):
    """A call into libthreelc failed; ``code`` is the THREELC_E* value."""

    def __init__(self, message: str, code: int):
        super().__init__(message)
        self.code = code


class BlockInfo(NamedTuple):
    count: int   # number of values
    format: int  # FORMAT_RAW (0) or FORMAT_3LC (1)
    scale: float  # 3LC: M * s; raw: 0.0


def _check(rc: int, what: str) -> None:
    if rc != 0:
        message = lib.threelc_codec_last_error().decode("utf-8", "replace")
        raise CodecError(f"{what}: {message}", rc)


def _float_ptr(a: np.ndarray):
    return a.ctypes.data_as(ctypes.POINTER(ctypes.c_float))


def _values(x, name: str = "x") -> np.ndarray:
    if not isinstance(x, np.ndarray):
        raise TypeError(f"{name} must be a numpy.ndarray, got {type(x).__name__}")
    if x.dtype not in _DTYPES:
        raise TypeError(f"{name} has dtype {x.dtype}, expected float32 or float16 "
                        "(native byte order)")
    if x.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {x.shape}")
    if not x.flags.c_contiguous:
        raise ValueError(f"{name} must be contiguous (got strides {x.strides}); "
                         "pass np.ascontiguousarray(x)")
    return x


def _float32_out(a, name: str, count: Optional[int]) -> np.ndarray:
    """A float32, 1-D, C-contiguous, writable array (of `count` values unless None)."""
    if not isinstance(a, np.ndarray):
        raise TypeError(f"{name} must be a numpy.ndarray, got {type(a).__name__}")
    if a.dtype != np.float32:
        raise TypeError(f"{name} has dtype {a.dtype}, expected float32 (native byte order)")
    if a.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {a.shape}")
    if count is not None and a.shape[0] != count:
        raise ValueError(f"{name} has shape {a.shape}, expected ({count},)")
    if not a.flags.c_contiguous:
        raise ValueError(f"{name} must be contiguous (got strides {a.strides})")
    if not a.flags.writeable:
        raise ValueError(f"{name} must be writable")
    return a


def _block(block: Buffer) -> np.ndarray:
    if isinstance(block, np.ndarray):
        if block.dtype != np.uint8 or block.ndim != 1 or not block.flags.c_contiguous:
            raise TypeError(f"block array must be 1-D contiguous uint8, got {block.dtype} "
                            f"with shape {block.shape}")
        return block
    if not isinstance(block, (bytes, bytearray, memoryview)):
        raise TypeError(f"block must be bytes, bytearray, memoryview or a uint8 array, got "
                        f"{type(block).__name__}")
    try:
        return np.frombuffer(block, dtype=np.uint8)
    except (ValueError, BufferError) as exc:
        raise ValueError(f"block must be a contiguous byte buffer: {exc}") from exc


def max_block_bytes(count: int) -> int:
    """Largest block (3LC or raw) that `count` values can encode to."""
    return int(lib.threelc_codec_max_block_bytes(count))


def compress(x: np.ndarray, residual: Optional[np.ndarray] = None, sparsity: float = 1.0,
             scale_tile: int = 0, *, error: Optional[np.ndarray] = None) -> bytes:
    """Encodes the 1-D float32/float16 array `x` as one 3LC block.

    `residual`, when given, is the float32 error-feedback memory (same length as `x`): the
    block encodes ``x + residual`` and ``residual`` is updated in place to what this block
    leaves out, so that ``decompress(block) + residual_new == x + residual_old`` exactly.
    `sparsity` is the multiplier s in [1, 2) (larger: sparser blocks, lower fidelity).
    `scale_tile` 0 writes format v1 (one scale for the block, the paper's 3LC); a multiple
    of 5 up to 20480 writes format v2 with a scale per tile of that many values (more
    accurate, a few more bytes).
    Input holding NaN or Inf yields a raw fp32 block of `x` and leaves `residual` untouched.
    ``error=`` is a deprecated name of `residual` (DeprecationWarning).
    """
    if error is not None:
        if residual is not None:
            raise TypeError("compress() got both residual and error (its deprecated name)")
        warnings.warn("threelc.codec.compress(error=...) is deprecated: pass residual=",
                      DeprecationWarning, stacklevel=2)
        residual = error
    if isinstance(scale_tile, bool) or not isinstance(scale_tile, (int, np.integer)) \
            or scale_tile < 0:
        raise ValueError(f"scale_tile must be a non-negative integer, got {scale_tile!r}")
    x = _values(x)
    residual_ptr = None
    if residual is not None:
        residual = _float32_out(residual, "residual", x.shape[0])
        if np.may_share_memory(x, residual):
            raise ValueError("residual must not overlap x")
        residual_ptr = _float_ptr(residual)
    sparsity = float(sparsity)
    capacity = max_block_bytes(x.shape[0])
    out = np.empty(capacity, dtype=np.uint8)
    size = ctypes.c_size_t(0)
    rc = lib.threelc_codec_encode_tiled(x.ctypes.data, _DTYPES[x.dtype], x.shape[0],
                                        residual_ptr, sparsity, int(scale_tile),
                                        out.ctypes.data, capacity, ctypes.byref(size))
    _check(rc, "compress")
    return out[: size.value].tobytes()


def compress_raw(x: np.ndarray) -> bytes:
    """Encodes the 1-D float32/float16 array `x` as a raw fp32 block (no quantization)."""
    x = _values(x)
    capacity = max_block_bytes(x.shape[0])
    out = np.empty(capacity, dtype=np.uint8)
    size = ctypes.c_size_t(0)
    rc = lib.threelc_codec_encode_raw(x.ctypes.data, _DTYPES[x.dtype], x.shape[0],
                                      out.ctypes.data, capacity, ctypes.byref(size))
    _check(rc, "compress_raw")
    return out[: size.value].tobytes()


def inspect(block: Buffer) -> BlockInfo:
    """Validates `block` completely and returns its (count, format, scale)."""
    buf = _block(block)
    count = ctypes.c_uint32(0)
    fmt = ctypes.c_int(0)
    scale = ctypes.c_float(0.0)
    rc = lib.threelc_codec_inspect(buf.ctypes.data, buf.shape[0], ctypes.byref(count),
                                   ctypes.byref(fmt), ctypes.byref(scale))
    _check(rc, "malformed block")
    return BlockInfo(count.value, fmt.value, scale.value)


def decompress(block: Buffer, count: Optional[int] = None) -> np.ndarray:
    """Decodes `block` into a new float32 array.

    `count`, when given, is the number of values the caller expects; a block of another
    length is rejected. Any malformed block raises CodecError (a ValueError).
    """
    buf = _block(block)
    # Validate before allocating: the header's count is untrusted until then.
    info = inspect(buf)
    if count is not None and info.count != count:
        raise CodecError(f"malformed block: block holds {info.count} values, "
                         f"receiver expects {count}", EMALFORMED)
    out = np.empty(info.count, dtype=np.float32)
    rc = lib.threelc_codec_decode(buf.ctypes.data, buf.shape[0], info.count, _float_ptr(out))
    _check(rc, "malformed block")
    return out


def decompress_add(block: Buffer, dst: np.ndarray, alpha: float = 1.0) -> np.ndarray:
    """``dst += alpha * decoded`` in place (fp32 multiply then add); returns `dst`.

    `dst` is a float32, 1-D, contiguous array whose length must equal the block's count.
    The block is validated before the first write, so on error `dst` is unchanged.
    """
    buf = _block(block)
    dst = _float32_out(dst, "dst", None)
    rc = lib.threelc_codec_decode_add(buf.ctypes.data, buf.shape[0], dst.shape[0],
                                      float(alpha), _float_ptr(dst))
    _check(rc, "malformed block")
    return dst


def isa() -> str:
    """Name of the kernels in use: "scalar", "avx2" or "avx512"."""
    return lib.threelc_codec_isa().decode()
