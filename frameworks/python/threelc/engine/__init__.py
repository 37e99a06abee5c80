"""ctypes binding of the engine's C ABI (``threelc/threelc.h``).

A thin layer: every C function has a Python counterpart here, and nothing is decided in
Python that the engine decides (negotiation, fusion, compression, error feedback all happen
behind the C ABI). What this module adds:

- numpy arrays in, numpy arrays out. Inputs must be C-contiguous with a native byte order and
  one of the engine's 9 element types: uint8, int8, int16, int32, int64, float16, bfloat16,
  float32, float64. numpy has no bfloat16: pass the raw bits as a uint16 array together with
  ``dtype="bfloat16"`` (an ``ml_dtypes.bfloat16`` array is recognized as well).
- :class:`Handle` for a submitted operation: it keeps the input and output buffers (and the
  name, shape and splits the C structs point to) alive until the operation has finished;
  ``wait()`` returns the result, or raises :class:`ThreelcError` with the operation's message
  and code, then releases the C handle. A Handle dropped while its operation is pending parks
  its buffers until the engine is done with them (they are released at a later call).
- :class:`ThreelcError` (a RuntimeError) with ``code`` = the THREELC_E* value; failures of a
  submission carry ``threelc_last_error()``.

The Horovod-style functional API (allreduce returning a new array, op=Average, ...) is
:mod:`threelc.numpy`; this module is what it, and the framework adapters, stand on.

Import these names from ``threelc.engine``; the modules of this package hold them by job:

- ``errors``: the THREELC_E* codes, :func:`error_name`, :class:`ThreelcError`;
- ``abi``: the C structs and function signatures, declared on first use; :func:`last_error`;
- ``reduce_ops``: Sum, Average, Min, Max, Product; ``compression``: Compression, WireCompression;
- ``lifecycle``: init, shutdown, rank, size, ..., CUDA support, version;
- ``counters``: Statistics, statistics; ``feedback``: feedback_save, feedback_load;
- ``handles``: Handle, poll, wait, synchronize;
- ``arguments`` (arrays, names and options into C structs), ``results`` (results out of
  them) and ``collectives``: allreduce, push_pull, broadcast, allgather, ... (submissions),
  each taking ``process_set=<id>``;
- ``process_sets``: add_process_set, remove_process_set and the queries (process_set_size,
  _rank, _included, _ranks, process_set_ids).

The element types (``DTYPES``, ``dtype_code``) are :mod:`threelc.dtypes`'s.
"""

from __future__ import annotations

# _fn, _initialized_struct, _Tensor, _options and _submit are internals that tests reach for
# (to hand the C ABI what the Python checks would refuse); everything else is the API.
from ..dtypes import DTYPES, DTypeLike, dtype_code
from .abi import MAX_DIMS, _fn, _initialized_struct, _Tensor, last_error
from .arguments import _options
from .collectives import (_submit, allgather, allreduce, allreduce_device, alltoall, barrier,
                          broadcast, flush, join, push_pull, reducescatter)
from .compression import Compression, WireCompression
from .counters import Statistics, statistics
from .errors import (EDUPLICATE, EINTERNAL, EINVAL, EJOINED, EMALFORMED, EMISMATCH, ENOTINIT,
                     EPEER, ESHUTDOWN, ETIMEOUT, OK, ThreelcError, error_name)
from .feedback import feedback_load, feedback_save
from .handles import Handle, poll, synchronize, wait
from .lifecycle import (cross_rank, cross_size, cuda_built, cuda_unavailable_reason, init,
                        is_homogeneous, is_initialized, local_rank, local_size, nccl_version,
                        rank, shutdown, size, version)
from .process_sets import (add_process_set, add_process_set_async, process_set_ids,
                           process_set_included, process_set_rank, process_set_ranks,
                           process_set_size, remove_process_set, remove_process_set_async)
from .reduce_ops import Average, Max, Min, Product, ReduceOp, Sum

__all__ = [
    # errors and codes
    "ThreelcError", "OK", "EINVAL", "EMALFORMED", "ENOTINIT", "ESHUTDOWN", "EMISMATCH",
    "EDUPLICATE", "EPEER", "ETIMEOUT", "EJOINED", "EINTERNAL", "error_name",
    # ops, compression, dtypes
    "Sum", "Average", "Min", "Max", "Product", "ReduceOp", "Compression", "WireCompression",
    "DTYPES", "dtype_code", "MAX_DIMS",
    # lifecycle and identity
    "init", "shutdown", "is_initialized", "rank", "size", "local_rank", "local_size",
    "cross_rank", "cross_size", "is_homogeneous", "version", "last_error", "Statistics", "statistics",
    "cuda_built", "cuda_unavailable_reason", "nccl_version",
    # error-feedback checkpoints
    "feedback_save", "feedback_load",
    # operations
    "Handle", "allreduce", "push_pull", "broadcast", "allgather", "reducescatter", "alltoall",
    "barrier", "join", "poll", "wait", "synchronize",
    # process sets
    "add_process_set", "add_process_set_async", "remove_process_set",
    "remove_process_set_async", "process_set_size", "process_set_rank", "process_set_included",
    "process_set_ranks", "process_set_ids",
]
