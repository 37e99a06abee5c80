"""Horovod-style functional API on numpy arrays.

    import threelc.numpy as hvd
    hvd.init()
    avg = hvd.allreduce(grad, name="layer1.weight")        # op=Average, as in Horovod
    total = hvd.allreduce(x, op=hvd.Sum, compression=hvd.Compression.none)
    h = hvd.allreduce_async(grad, name="layer2.weight")     # Handle
    result = hvd.synchronize(h)
    w = hvd.broadcast(w, root_rank=0)
    rows = hvd.allgather(local_rows)                        # first dimensions may differ
    part = hvd.reducescatter(x)                             # op=Average
    received, received_splits = hvd.alltoall(x, splits=[1, 3, 0, 2])
    hvd.barrier()
    last = hvd.join()
    hvd.shutdown()

Every function takes any array-like (a non-contiguous array is copied first) and returns new
arrays; the input is never modified. The element types are the engine's: uint8, int8, int16,
int32, int64, float16, float32, float64, and bfloat16 as uint16 bit patterns with
``dtype="bfloat16"``. Errors raise :class:`threelc.ThreelcError` (``code`` is the
THREELC_E* value). ``*_async`` variants return a :class:`threelc.engine.Handle`;
``synchronize(handle)`` waits for it and returns its result.
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from . import engine as _engine
from .engine import (Average, Compression, Handle, Max, Min, Product, Sum, ThreelcError,
                     cross_rank, cross_size, init, is_initialized, local_rank, local_size, rank,
                     shutdown, size, statistics)

__all__ = [
    "init", "shutdown", "is_initialized", "rank", "size", "local_rank", "local_size",
    "cross_rank", "cross_size", "statistics",
    "ThreelcError", "Handle", "Sum", "Average", "Min", "Max", "Product", "Compression",
    "allreduce", "allreduce_async", "push_pull", "push_pull_async", "broadcast",
    "broadcast_async", "allgather", "allgather_async", "reducescatter", "reducescatter_async",
    "alltoall", "alltoall_async", "barrier", "join", "synchronize", "poll",
]


def _contiguous(array) -> np.ndarray:
    a = np.asarray(array)
    # np.ascontiguousarray would turn a 0-d array into a 1-d one.
    return a if a.flags.c_contiguous else a.copy(order="C")


def allreduce_async(array, name: Optional[str] = None, op=Average,
                    prescale_factor: float = 1.0, postscale_factor: float = 1.0,
                    compression=None, sparsity: Optional[float] = None,
                    dtype=None) -> Handle:
    """Submits an allreduce; ``synchronize(handle)`` returns the reduced array.

    `op`: Average (default, as Horovod), Sum, Min, Max or Product. `prescale_factor`
    multiplies the input before the reduction, `postscale_factor` the result after it (and
    after averaging). `compression`: None (THREELC_COMPRESSION decides), Compression.none or
    Compression.threelc; `sparsity` (in [1, 2)) overrides THREELC_SPARSITY for this tensor.
    Error feedback is kept per `name`: give a gradient the same name every step.
    """
    return _engine.allreduce(_contiguous(array), name=name, op=op, prescale=prescale_factor,
                             postscale=postscale_factor, compression=compression,
                             sparsity=sparsity, dtype=dtype)


def allreduce(array, name: Optional[str] = None, op=Average, prescale_factor: float = 1.0,
              postscale_factor: float = 1.0, compression=None, sparsity: Optional[float] = None,
              dtype=None) -> np.ndarray:
    """The reduction of `array` over every rank, as a new array (see allreduce_async)."""
    return allreduce_async(array, name=name, op=op, prescale_factor=prescale_factor,
                           postscale_factor=postscale_factor, compression=compression,
                           sparsity=sparsity, dtype=dtype).wait()


def push_pull_async(array, name: Optional[str] = None, op=Average,
                    prescale_factor: float = 1.0, postscale_factor: float = 1.0,
                    compression=None, sparsity: Optional[float] = None,
                    dtype=None) -> Handle:
    """An alias of :func:`allreduce_async` (BytePS's name for it): the same operation."""
    return _engine.push_pull(_contiguous(array), name=name, op=op, prescale=prescale_factor,
                             postscale=postscale_factor, compression=compression,
                             sparsity=sparsity, dtype=dtype)


def push_pull(array, name: Optional[str] = None, op=Average, prescale_factor: float = 1.0,
              postscale_factor: float = 1.0, compression=None, sparsity: Optional[float] = None,
              dtype=None) -> np.ndarray:
    """An alias of :func:`allreduce` (BytePS's name for it): the same operation."""
    return push_pull_async(array, name=name, op=op, prescale_factor=prescale_factor,
                           postscale_factor=postscale_factor, compression=compression,
                           sparsity=sparsity, dtype=dtype).wait()


def broadcast_async(array, root_rank: int, name: Optional[str] = None,
                    dtype=None) -> Handle:
    return _engine.broadcast(_contiguous(array), root_rank, name=name, dtype=dtype)


def broadcast(array, root_rank: int, name: Optional[str] = None, dtype=None) -> np.ndarray:
    """root_rank's `array` on every rank (every rank passes an array of the same shape and
    dtype), as a new array."""
    return broadcast_async(array, root_rank, name=name, dtype=dtype).wait()


def allgather_async(array, name: Optional[str] = None, dtype=None) -> Handle:
    return _engine.allgather(_contiguous(array), name=name, dtype=dtype)


def allgather(array, name: Optional[str] = None, dtype=None) -> np.ndarray:
    """Every rank's `array` concatenated along the first dimension in rank order; the first
    dimension may differ between ranks (0 included), the others may not."""
    return allgather_async(array, name=name, dtype=dtype).wait()


def reducescatter_async(array, name: Optional[str] = None, op=Average,
                        prescale_factor: float = 1.0, postscale_factor: float = 1.0,
                        dtype=None) -> Handle:
    return _engine.reducescatter(_contiguous(array), name=name, op=op,
                                 prescale=prescale_factor, postscale=postscale_factor,
                                 dtype=dtype)


def reducescatter(array, name: Optional[str] = None, op=Average, prescale_factor: float = 1.0,
                  postscale_factor: float = 1.0, dtype=None) -> np.ndarray:
    """This rank's part of the reduction (default Average, as Horovod) of `array`: rows of
    the first dimension cut into size() parts, the first dim0 % size() one row longer."""
    return reducescatter_async(array, name=name, op=op, prescale_factor=prescale_factor,
                               postscale_factor=postscale_factor, dtype=dtype).wait()


def alltoall_async(array, splits: Optional[Sequence[int]] = None, name: Optional[str] = None,
                   dtype=None) -> Handle:
    return _engine.alltoall(_contiguous(array), splits, name=name, dtype=dtype)


def alltoall(array, splits: Optional[Sequence[int]] = None, name: Optional[str] = None,
             dtype=None):
    """Sends rows ``splits[j]`` of `array`'s first dimension to rank j (None: size() equal
    parts) and returns ``(rows received, in rank order; received_splits)``."""
    return alltoall_async(array, splits, name=name, dtype=dtype).wait()


def barrier() -> None:
    """Returns once every rank has called barrier()."""
    _engine.barrier().wait()


def join() -> int:
    """Declares that this rank has no more data: until every rank has joined it takes part
    in the others' allreduces with the op's identity and in allgathers with no rows. Returns
    the rank that joined last."""
    return _engine.join().wait()


def synchronize(handle: Handle, timeout: Optional[float] = None):
    """Waits for `handle` and returns its result (raises ThreelcError on failure)."""
    return handle.wait(timeout)


def poll(handle: Handle) -> bool:
    """True once the operation of `handle` has finished."""
    return handle.poll()
