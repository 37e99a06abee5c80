"""ctypes binding of the engine's C ABI (``threelc/threelc.h``).

A thin layer: every C function has a Python counterpart here, and nothing is decided in
Python that the engine decides (negotiation, fusion, compression, error feedback all happen
behind the C ABI). What this module adds:

- numpy arrays in, numpy arrays out. Inputs must be C-contiguous with a native byte order and
  one of the engine's 8 element types: uint8, int8, int32, int64, float16, bfloat16, float32,
  float64. numpy has no bfloat16: pass the raw bits as a uint16 array together with
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
"""

from __future__ import annotations

import ctypes
import threading
import time
from typing import Any, Callable, NamedTuple, Optional, Sequence, Union

import numpy as np

from . import _library
from ._library import lib

__all__ = [
    # errors and codes
    "ThreelcError", "OK", "EINVAL", "EMALFORMED", "ENOTINIT", "ESHUTDOWN", "EMISMATCH",
    "EDUPLICATE", "EPEER", "ETIMEOUT", "EJOINED", "EINTERNAL", "error_name",
    # ops, compression, dtypes
    "Sum", "Average", "Min", "Max", "Product", "ReduceOp", "Compression", "Compressor",
    "DTYPES", "dtype_code", "MAX_DIMS",
    # lifecycle and identity
    "init", "shutdown", "is_initialized", "rank", "size", "local_rank", "local_size",
    "cross_rank", "cross_size", "version", "last_error", "Statistics", "statistics",
    # error-feedback checkpoints
    "feedback_save", "feedback_load",
    # operations
    "Handle", "allreduce", "push_pull", "broadcast", "allgather", "reducescatter", "alltoall",
    "barrier", "join", "poll", "wait", "synchronize",
]

# ----------------------------------------------------------------------------- codes

OK = 0
EINVAL = -1
EMALFORMED = -2
ENOTINIT = -3
ESHUTDOWN = -4
EMISMATCH = -5
EDUPLICATE = -6
EPEER = -7
ETIMEOUT = -8
EJOINED = -9
EINTERNAL = -10

_CODE_NAMES = {
    OK: "THREELC_OK", EINVAL: "THREELC_EINVAL", EMALFORMED: "THREELC_EMALFORMED",
    ENOTINIT: "THREELC_ENOTINIT", ESHUTDOWN: "THREELC_ESHUTDOWN",
    EMISMATCH: "THREELC_EMISMATCH", EDUPLICATE: "THREELC_EDUPLICATE", EPEER: "THREELC_EPEER",
    ETIMEOUT: "THREELC_ETIMEOUT", EJOINED: "THREELC_EJOINED", EINTERNAL: "THREELC_EINTERNAL",
}


def error_name(code: int) -> str:
    """``"THREELC_EMISMATCH"`` for -5, ...; ``"code N"`` for a code this module does not know."""
    return _CODE_NAMES.get(code, f"code {code}")


class ThreelcError(RuntimeError):
    """A call into the engine, or an operation it ran, failed.

    ``code`` is the THREELC_E* value (see the module constants, e.g. ``EMISMATCH``);
    ``str(error)`` is the engine's message.
    """

    def __init__(self, message: str, code: int = EINTERNAL):
        super().__init__(message)
        self.code = code

    @property
    def code_name(self) -> str:
        return error_name(self.code)


# ------------------------------------------------------------------------ ops, dtypes

class ReduceOp(int):
    """A reduction (threelc_reduce_op); an int, so it goes straight into the C struct."""

    _NAMES = {0: "Sum", 1: "Average", 2: "Min", 3: "Max", 4: "Product"}

    def __repr__(self) -> str:
        return f"threelc.{self._NAMES.get(int(self), int(self))}"


Sum = ReduceOp(0)
Average = ReduceOp(1)  # the sum divided by the number of ranks, after decoding
Min = ReduceOp(2)
Max = ReduceOp(3)
Product = ReduceOp(4)
_OPS = (Sum, Average, Min, Max, Product)

# threelc_compression
_COMPRESSION_DEFAULT = 0
_COMPRESSION_NONE = 1
_COMPRESSION_3LC = 2


class Compressor(NamedTuple):
    """How one allreduce is compressed: ``mode`` (threelc_compression) and ``sparsity``
    (the 3LC multiplier s in [1, 2); None follows THREELC_SPARSITY).

    ``Compression.threelc`` is a Compressor; calling it sets the sparsity:
    ``Compression.threelc(sparsity=1.25)``.
    """

    mode: int
    sparsity: Optional[float] = None

    def __call__(self, sparsity: Optional[float] = None) -> "Compressor":
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

    default = Compressor(_COMPRESSION_DEFAULT)
    none = Compressor(_COMPRESSION_NONE)
    threelc = Compressor(_COMPRESSION_3LC)


MAX_DIMS = 8
_DEVICE_CPU = -1

# threelc_dtype numbering (threelc/codec.h); bfloat16 (5) has no numpy dtype.
_BFLOAT16 = 5
DTYPES = {
    "uint8": 0, "int8": 1, "int32": 2, "int64": 3,
    "float16": 4, "bfloat16": 5, "float32": 6, "float64": 7,
}
_NUMPY_CODES = {
    np.dtype(np.uint8): 0, np.dtype(np.int8): 1, np.dtype(np.int32): 2,
    np.dtype(np.int64): 3, np.dtype(np.float16): 4, np.dtype(np.float32): 6,
    np.dtype(np.float64): 7,
}
_CODE_ITEMSIZE = {0: 1, 1: 1, 2: 4, 3: 8, 4: 2, 5: 2, 6: 4, 7: 8}

DTypeLike = Union[str, np.dtype, type, None]


def dtype_code(array: np.ndarray, dtype: DTypeLike = None) -> int:
    """The threelc_dtype of `array`: its own dtype, or `dtype` when given (which must agree
    with the array's; ``"bfloat16"`` takes a uint16/int16 array of bf16 bit patterns)."""
    adt = array.dtype
    if dtype is not None:
        name = dtype if isinstance(dtype, str) else np.dtype(dtype).name
        if name not in DTYPES:
            raise TypeError(f"dtype {dtype!r} is not one the engine reduces; expected one of "
                            f"{', '.join(DTYPES)}")
        code = DTYPES[name]
        if code == _BFLOAT16:
            if adt.name == "bfloat16" or (adt.kind in "ui" and adt.itemsize == 2):
                if not adt.isnative:
                    raise TypeError(f"array has non-native byte order ({adt})")
                return code
            raise TypeError(f"dtype='bfloat16' needs an array of bf16 bit patterns (uint16 or "
                            f"int16, or an ml_dtypes bfloat16 array), got {adt}")
        if _NUMPY_CODES.get(adt) != code:
            raise TypeError(f"dtype={name!r} does not match the array's dtype {adt}")
        return code
    if adt.name == "bfloat16" and adt.itemsize == 2:  # ml_dtypes.bfloat16
        return _BFLOAT16
    code = _NUMPY_CODES.get(adt)
    if code is None:
        hint = (" (for bfloat16 pass the bits as uint16 with dtype='bfloat16')"
                if adt == np.dtype(np.uint16) else "")
        raise TypeError(f"array dtype {adt} is not supported: expected uint8, int8, int32, "
                        f"int64, float16, float32, float64 or bfloat16 in native byte "
                        f"order{hint}")
    return code


# ------------------------------------------------------------------------- C structs

class _Tensor(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("dtype", ctypes.c_int),
        ("ndim", ctypes.c_int),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("data", ctypes.c_void_p),
        ("output", ctypes.c_void_p),
        ("device", ctypes.c_int),
        ("stream", ctypes.c_void_p),
    ]


class _Options(ctypes.Structure):
    _fields_ = [
        ("op", ctypes.c_int),
        ("prescale", ctypes.c_double),
        ("postscale", ctypes.c_double),
        ("compression", ctypes.c_int),
        ("sparsity", ctypes.c_float),
        ("root_rank", ctypes.c_int),
        ("splits", ctypes.POINTER(ctypes.c_int64)),
        ("nsplits", ctypes.c_int),
    ]


class _Result(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("bytes", ctypes.c_size_t),
        ("dtype", ctypes.c_int),
        ("ndim", ctypes.c_int),
        ("shape", ctypes.c_int64 * MAX_DIMS),
        ("received_splits", ctypes.POINTER(ctypes.c_int64)),
        ("nsplits", ctypes.c_int),
        ("last_joined_rank", ctypes.c_int),
    ]


class _Statistics(ctypes.Structure):
    _fields_ = [
        ("wire_bytes_sent", ctypes.c_uint64),
        ("wire_bytes_received", ctypes.c_uint64),
        ("operations", ctypes.c_uint64),
        ("allreduce_bytes", ctypes.c_uint64),
    ]


# Structs only grow at their end: the *_init functions of a newer library may write fields
# this module does not know, so they fill a padded buffer and the known prefix is used.
_STRUCT_SLACK = 256


def _initialized_struct(cls, init_name: str):
    raw = ctypes.create_string_buffer(ctypes.sizeof(cls) + _STRUCT_SLACK)
    _fn(init_name)(raw)
    struct = cls.from_buffer_copy(raw.raw[: ctypes.sizeof(cls)])
    return struct


# ------------------------------------------------------------------ the C functions

_handle_t = ctypes.c_int64
_SIGNATURES = {
    "threelc_tensor_init": (None, [ctypes.c_void_p]),
    "threelc_options_init": (None, [ctypes.c_void_p]),
    "threelc_init": (ctypes.c_int, []),
    "threelc_shutdown": (ctypes.c_int, []),
    "threelc_is_initialized": (ctypes.c_int, []),
    "threelc_cuda_built": (ctypes.c_int, []),
    "threelc_cuda_available": (ctypes.c_int, []),
    "threelc_rank": (ctypes.c_int, []),
    "threelc_size": (ctypes.c_int, []),
    "threelc_local_rank": (ctypes.c_int, []),
    "threelc_local_size": (ctypes.c_int, []),
    "threelc_cross_rank": (ctypes.c_int, []),
    "threelc_cross_size": (ctypes.c_int, []),
    "threelc_allreduce": (_handle_t, [ctypes.POINTER(_Tensor), ctypes.POINTER(_Options)]),
    "threelc_push_pull": (_handle_t, [ctypes.POINTER(_Tensor), ctypes.POINTER(_Options)]),
    "threelc_broadcast": (_handle_t, [ctypes.POINTER(_Tensor), ctypes.POINTER(_Options)]),
    "threelc_allgather": (_handle_t, [ctypes.POINTER(_Tensor), ctypes.POINTER(_Options)]),
    "threelc_reducescatter": (_handle_t, [ctypes.POINTER(_Tensor), ctypes.POINTER(_Options)]),
    "threelc_alltoall": (_handle_t, [ctypes.POINTER(_Tensor), ctypes.POINTER(_Options)]),
    "threelc_barrier": (_handle_t, []),
    "threelc_join": (_handle_t, []),
    "threelc_flush": (ctypes.c_int, []),
    "threelc_poll": (ctypes.c_int, [_handle_t]),
    "threelc_wait": (ctypes.c_int, [_handle_t, ctypes.c_int64]),
    "threelc_handle_error": (ctypes.c_char_p, [_handle_t]),
    "threelc_handle_result": (ctypes.c_int, [_handle_t, ctypes.POINTER(_Result)]),
    "threelc_release": (ctypes.c_int, [_handle_t]),
    "threelc_get_statistics": (ctypes.c_int, [ctypes.POINTER(_Statistics)]),
    "threelc_feedback_save": (ctypes.c_int64, [ctypes.c_char_p, ctypes.c_void_p,
                                               ctypes.c_size_t]),
    "threelc_feedback_load": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t]),
    "threelc_last_error": (ctypes.c_char_p, []),
    "threelc_version": (ctypes.c_char_p, []),
}
_declared: dict = {}
_declare_lock = threading.Lock()


def _fn(name: str):
    """The declared C function `name`. The library is loaded at import, but the engine's
    symbols are looked up on first use, so that a codec-only build still imports."""
    fn = _declared.get(name)
    if fn is not None:
        return fn
    with _declare_lock:
        fn = _declared.get(name)
        if fn is None:
            try:
                fn = getattr(lib, name)
            except AttributeError:
                raise ThreelcError(f"{_library.path} does not export {name}: it was built "
                                   f"without the engine, or is older than this package; "
                                   f"{_library.BUILD_HINT}", EINTERNAL) from None
            restype, argtypes = _SIGNATURES[name]
            fn.restype = restype
            fn.argtypes = argtypes
            _declared[name] = fn
    return fn


def _text(raw: Optional[bytes]) -> str:
    return "" if not raw else raw.decode("utf-8", "replace")


def last_error() -> str:
    """The calling thread's message for its last failing engine call ("" if none)."""
    return _text(_fn("threelc_last_error")())


def _check(rc: int, what: str) -> int:
    if rc < 0:
        message = last_error() or f"{what} failed with {error_name(rc)}"
        raise ThreelcError(message, rc)
    return rc


def version() -> str:
    return _text(_fn("threelc_version")())


# ------------------------------------------------------------------ lifecycle, identity

def init() -> None:
    """Joins the job described by the environment (threelcrun, mpirun, srun, torchrun).

    Raises ThreelcError naming the variable for a malformed THREELC_* value, or naming the
    ranks that never arrived. A no-op while initialized; after shutdown() it joins anew.
    """
    _check(_fn("threelc_init")(), "threelc_init")


def shutdown() -> None:
    """Stops the engine: operations still pending fail with ESHUTDOWN. No-op when not
    initialized."""
    try:
        _check(_fn("threelc_shutdown")(), "threelc_shutdown")
    finally:
        _reap_orphans()


def is_initialized() -> bool:
    return bool(_fn("threelc_is_initialized")())


def cuda_built() -> bool:
    """Whether libthreelc.so was built with CUDA (the CUDA 3LC codec, device allreduce)."""
    return bool(_fn("threelc_cuda_built")())


def cuda_unavailable_reason() -> str:
    """"" when allreduce takes CUDA tensors in this process (:func:`allreduce_device`);
    otherwise why not (no CUDA in the build, no device visible)."""
    if _fn("threelc_cuda_available")():
        return ""
    return last_error() or "CUDA tensors are not available"


def rank() -> int:
    """This process's rank; -1 when not initialized."""
    return int(_fn("threelc_rank")())


def size() -> int:
    """The number of ranks; -1 when not initialized."""
    return int(_fn("threelc_size")())


def local_rank() -> int:
    """Rank among the ranks on this host; -1 when not initialized."""
    return int(_fn("threelc_local_rank")())


def local_size() -> int:
    """Number of ranks on this host; -1 when not initialized."""
    return int(_fn("threelc_local_size")())


def cross_rank() -> int:
    """This host's index among the hosts; -1 when not initialized."""
    return int(_fn("threelc_cross_rank")())


def cross_size() -> int:
    """Number of hosts; -1 when not initialized."""
    return int(_fn("threelc_cross_size")())


class Statistics(NamedTuple):
    wire_bytes_sent: int      # bytes this rank sent on the data channels
    wire_bytes_received: int  # bytes it received on them
    operations: int           # operations completed (successfully or not)
    allreduce_bytes: int      # input bytes of the allreduces it completed


def statistics() -> Statistics:
    """This rank's traffic and work since init (threelc_get_statistics)."""
    s = _Statistics()
    _check(_fn("threelc_get_statistics")(ctypes.byref(s)), "threelc_get_statistics")
    return Statistics(int(s.wire_bytes_sent), int(s.wire_bytes_received), int(s.operations),
                      int(s.allreduce_bytes))


# ------------------------------------------------------------- error-feedback checkpoints

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


# ----------------------------------------------------------------------------- handles

_WAIT_SLICE_MS = 200  # wait in slices so that Ctrl-C reaches Python while waiting

_orphans: list = []  # (handle id, kept objects) of Handles dropped while pending
_orphans_lock = threading.Lock()


def _reap_orphans() -> None:
    """Releases dropped handles whose operations have finished (their buffers go with them)."""
    with _orphans_lock:
        if not _orphans:
            return
        keep = []
        for hid, objects in _orphans:
            rc = _fn("threelc_poll")(hid)
            if rc == 0:
                keep.append((hid, objects))
            elif rc == 1:
                _fn("threelc_release")(hid)
            # rc < 0: the engine no longer knows the handle; nothing can touch the buffers
        _orphans[:] = keep


class Handle:
    """A submitted operation.

    ``poll()`` says whether it has finished; ``wait(timeout=None)`` blocks until it has and
    returns its result (allreduce, broadcast: the output array; allgather, reducescatter: a
    new array; alltoall: ``(array, received_splits)``; join: the last rank to join; barrier:
    None) or raises :class:`ThreelcError` with the operation's message and code. The C
    handle is released once the outcome has been collected; later ``wait()`` calls return
    (or raise) the same outcome. The buffers the operation reads and writes are referenced
    by the Handle until then.
    """

    __slots__ = ("_id", "_kind", "_name", "_keep", "_finish", "_lock", "_done", "_value",
                 "_error", "__weakref__")

    def __init__(self, hid: int, kind: str, name: Optional[str], keep: tuple,
                 finish: Callable[[int], Any]):
        self._id = int(hid)
        self._kind = kind
        self._name = name
        self._keep = keep
        self._finish = finish
        self._lock = threading.Lock()
        self._done = False
        self._value = None
        self._error: Optional[tuple] = None  # (message, code)

    @property
    def id(self) -> int:
        """The C handle (threelc_handle)."""
        return self._id

    @property
    def kind(self) -> str:
        return self._kind

    @property
    def name(self) -> Optional[str]:
        return self._name

    def __repr__(self) -> str:
        state = "done" if self._done else "pending"
        return f"<threelc.Handle {self._id} {self._kind} {self._name!r} {state}>"

    def poll(self) -> bool:
        """True when the operation has finished (successfully or not)."""
        if self._done:
            return True
        rc = _fn("threelc_poll")(self._id)
        if rc < 0:
            with self._lock:
                if self._done:  # another thread collected it meanwhile
                    return True
            raise ThreelcError(last_error() or f"threelc_poll({self._id}) failed with "
                               f"{error_name(rc)}", rc)
        return rc == 1

    def done(self) -> bool:
        return self.poll()

    def wait(self, timeout: Optional[float] = None):
        """Waits for the operation and returns its result.

        `timeout` in seconds (None: no limit). When it runs out the operation is still
        pending: ThreelcError with code ETIMEOUT is raised and the handle stays usable.
        A failed operation raises ThreelcError(message, code).
        """
        with self._lock:
            if not self._done:
                deadline = None if timeout is None else time.monotonic() + max(0.0, timeout)
                while True:
                    if deadline is None:
                        slice_ms = _WAIT_SLICE_MS
                    else:
                        left = deadline - time.monotonic()
                        slice_ms = max(0, min(_WAIT_SLICE_MS, int(left * 1000)))
                    rc = _fn("threelc_wait")(self._id, slice_ms)
                    if rc != ETIMEOUT:
                        break
                    if deadline is not None and time.monotonic() >= deadline:
                        what = self._kind if not self._name else f"{self._kind} {self._name!r}"
                        raise ThreelcError(f"{what} still pending after {timeout} s", ETIMEOUT)
                self._collect(rc)
        if self._error is not None:
            raise ThreelcError(*self._error)
        return self._value

    def _collect(self, rc: int) -> None:
        """Called with the lock held once threelc_wait returned something else than ETIMEOUT."""
        try:
            if rc == OK:
                try:
                    self._value = self._finish(self._id)
                except ThreelcError as e:
                    self._error = (str(e), e.code)
            else:
                message = _text(_fn("threelc_handle_error")(self._id))
                if not message:
                    message = last_error() or f"{self._kind} failed with {error_name(rc)}"
                self._error = (message, rc)
        finally:
            _fn("threelc_release")(self._id)
            self._done = True
            self._keep = ()
            self._finish = None

    def __del__(self):
        try:
            if self._done:
                return
            rc = _fn("threelc_poll")(self._id)
            if rc == 1:
                _fn("threelc_release")(self._id)
            elif rc == 0:
                # Still pending: the engine may still read or write the buffers.
                with _orphans_lock:
                    _orphans.append((self._id, self._keep))
            self._done = True
        except Exception:  # interpreter shutdown, or the library is gone
            pass


def poll(handle: Handle) -> bool:
    return handle.poll()


def wait(handle: Handle, timeout: Optional[float] = None):
    return handle.wait(timeout)


synchronize = wait


# ------------------------------------------------------------------------ submissions

def _array(array, what: str = "array") -> np.ndarray:
    if not isinstance(array, np.ndarray):
        raise TypeError(f"{what} must be a numpy.ndarray, got {type(array).__name__}")
    if not array.flags.c_contiguous:
        raise ValueError(f"{what} must be C-contiguous (got strides {array.strides}); pass "
                         f"np.ascontiguousarray({what})")
    if array.ndim > MAX_DIMS:
        raise ValueError(f"{what} has {array.ndim} dimensions; the engine takes at most "
                         f"{MAX_DIMS}")
    return array


def _name_bytes(name: Optional[str]) -> Optional[bytes]:
    if name is None or name == "":
        return None
    if isinstance(name, bytes):
        raw = name
    elif isinstance(name, str):
        raw = name.encode("utf-8")
    else:
        raise TypeError(f"name must be a str, got {type(name).__name__}")
    if b"\0" in raw:
        raise ValueError(f"name {name!r} contains a NUL character")
    return raw


def _tensor(array: np.ndarray, code: int, name: Optional[bytes],
            output: Optional[np.ndarray]) -> tuple:
    t = _initialized_struct(_Tensor, "threelc_tensor_init")
    shape = (ctypes.c_int64 * max(1, array.ndim))(*array.shape)
    t.name = name
    t.dtype = code
    t.ndim = array.ndim
    t.shape = ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64))
    t.data = array.ctypes.data
    t.output = None if output is None else output.ctypes.data
    t.device = _DEVICE_CPU
    t.stream = None
    return t, shape


def _compression(compression, sparsity: Optional[float]) -> tuple:
    """(threelc_compression, sparsity float with 0 = follow THREELC_SPARSITY)."""
    if compression is None:
        mode, s = _COMPRESSION_DEFAULT, None
    elif isinstance(compression, Compressor):
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


def _options(op=Sum, prescale: float = 1.0, postscale: float = 1.0, compression=None,
             sparsity: Optional[float] = None, root_rank: int = 0,
             splits: Optional[np.ndarray] = None) -> _Options:
    o = _initialized_struct(_Options, "threelc_options_init")
    if int(op) not in range(len(_OPS)):
        raise ValueError(f"op {op!r} is not one of Sum, Average, Min, Max, Product")
    o.op = int(op)
    o.prescale = float(prescale)
    o.postscale = float(postscale)
    o.compression, o.sparsity = _compression(compression, sparsity)
    o.root_rank = int(root_rank)
    if splits is not None:
        o.splits = splits.ctypes.data_as(ctypes.POINTER(ctypes.c_int64))
        o.nsplits = int(splits.shape[0])
    return o


def _submit(cfn: str, kind: str, name: Optional[str], tensor, options, keep: tuple,
            finish: Callable[[int], Any]) -> Handle:
    _reap_orphans()
    if tensor is None:
        hid = _fn(cfn)()
    else:
        hid = _fn(cfn)(ctypes.byref(tensor), ctypes.byref(options))
    if hid <= 0:
        message = last_error() or f"{kind} was refused with {error_name(int(hid))}"
        raise ThreelcError(message, int(hid) if hid < 0 else EINTERNAL)
    # The structs themselves are read at submission only, but keeping them costs nothing.
    return Handle(hid, kind, name, keep + (tensor, options), finish)


def _result(hid: int) -> _Result:
    r = _Result()
    rc = _fn("threelc_handle_result")(hid, ctypes.byref(r))
    if rc < 0:
        raise ThreelcError(last_error() or f"threelc_handle_result failed with "
                           f"{error_name(rc)}", rc)
    return r


def _result_array(r: _Result, np_dtype: np.dtype) -> np.ndarray:
    """A copy of the engine-owned result tensor, with the caller's numpy dtype."""
    if not 0 <= r.ndim <= MAX_DIMS:
        raise ThreelcError(f"engine returned a result with ndim {r.ndim}", EINTERNAL)
    shape = tuple(int(r.shape[i]) for i in range(r.ndim))
    count = int(np.prod(shape, dtype=np.int64)) if shape else 1
    expected = count * np_dtype.itemsize
    if int(r.bytes) != expected:
        raise ThreelcError(f"engine returned {r.bytes} bytes for a result of shape {shape} "
                           f"and itemsize {np_dtype.itemsize} ({expected} bytes)", EINTERNAL)
    out = np.empty(shape, dtype=np_dtype)
    if expected:
        ctypes.memmove(out.ctypes.data, r.data, expected)
    return out


def _output(array: np.ndarray, output: Optional[np.ndarray]) -> np.ndarray:
    if output is None:
        return np.empty_like(array, order="C")
    output = _array(output, "output")
    if output.shape != array.shape or output.dtype != array.dtype:
        raise ValueError(f"output has shape {output.shape} and dtype {output.dtype}; expected "
                         f"{array.shape} and {array.dtype}")
    if not output.flags.writeable:
        raise ValueError("output must be writable")
    if output is not array and np.may_share_memory(array, output):
        raise ValueError("output partly overlaps the input; pass the input itself for an "
                         "in-place operation")
    return output


def allreduce(array: np.ndarray, output: Optional[np.ndarray] = None, *,
              name: Optional[str] = None, op=Sum, prescale: float = 1.0,
              postscale: float = 1.0, compression=None, sparsity: Optional[float] = None,
              dtype: DTypeLike = None, _cfn: str = "threelc_allreduce") -> Handle:
    """Submits an allreduce of `array` into `output` (a new array when None; may be `array`
    itself). ``wait()`` returns the output array.

    `op` defaults to Sum here (the C default); :func:`threelc.numpy.allreduce` follows
    Horovod with Average. `compression` is a Compression member (None: Compression.default);
    `sparsity` overrides its sparsity.
    """
    array = _array(array)
    code = dtype_code(array, dtype)
    out = _output(array, output)
    raw_name = _name_bytes(name)
    tensor, shape = _tensor(array, code, raw_name, out)
    options = _options(op=op, prescale=prescale, postscale=postscale, compression=compression,
                       sparsity=sparsity)
    kind = "push_pull" if _cfn == "threelc_push_pull" else "allreduce"
    return _submit(_cfn, kind, name, tensor, options, (array, out, shape, raw_name),
                   lambda hid: out)


def allreduce_device(data: int, output: int, shape: Sequence[int], dtype: str, device: int,
                     stream: int = 0, *, name: Optional[str] = None, op=Sum,
                     prescale: float = 1.0, postscale: float = 1.0, compression=None,
                     sparsity: Optional[float] = None, keep: tuple = (),
                     _cfn: str = "threelc_allreduce") -> Handle:
    """Submits an allreduce of a dense tensor in CUDA device memory: `data` and `output`
    (device pointers; output may equal data) of `shape` and engine dtype name `dtype`, on
    CUDA device `device`, ready on `stream` (a cudaStream_t as int; 0: the legacy default
    stream). `keep` holds whatever owns the memory until the handle completes; ``wait()``
    returns None once the output is written. Only compressed blocks cross PCIe when 3LC is
    used (docs/ARCHITECTURE.md)."""
    if dtype not in DTYPES:
        raise TypeError(f"dtype {dtype!r} is not one the engine reduces; expected one of "
                        f"{', '.join(DTYPES)}")
    dims = [int(d) for d in shape]
    raw_name = _name_bytes(name)
    t = _initialized_struct(_Tensor, "threelc_tensor_init")
    shape_array = (ctypes.c_int64 * max(1, len(dims)))(*dims)
    t.name = raw_name
    t.dtype = DTYPES[dtype]
    t.ndim = len(dims)
    t.shape = ctypes.cast(shape_array, ctypes.POINTER(ctypes.c_int64))
    t.data = int(data)
    t.output = int(output)
    t.device = int(device)
    t.stream = int(stream) or None
    options = _options(op=op, prescale=prescale, postscale=postscale, compression=compression,
                       sparsity=sparsity)
    kind = "push_pull" if _cfn == "threelc_push_pull" else "allreduce"
    return _submit(_cfn, kind, name, t, options, tuple(keep) + (shape_array, raw_name),
                   lambda hid: None)


def push_pull(array: np.ndarray, output: Optional[np.ndarray] = None, **kwargs) -> Handle:
    """The same operation as :func:`allreduce`, under the paper's name (threelc_push_pull)."""
    return allreduce(array, output, _cfn="threelc_push_pull", **kwargs)


def broadcast(array: np.ndarray, root_rank: int, output: Optional[np.ndarray] = None, *,
              name: Optional[str] = None, dtype: DTypeLike = None) -> Handle:
    """Submits a broadcast of root_rank's `array`; ``wait()`` returns the output array."""
    array = _array(array)
    code = dtype_code(array, dtype)
    out = _output(array, output)
    raw_name = _name_bytes(name)
    tensor, shape = _tensor(array, code, raw_name, out)
    options = _options(root_rank=root_rank)
    return _submit("threelc_broadcast", "broadcast", name, tensor, options,
                   (array, out, shape, raw_name), lambda hid: out)


def _engine_result(array: np.ndarray, code: int):
    np_dtype = array.dtype

    def finish(hid: int) -> np.ndarray:
        r = _result(hid)
        if r.dtype != code:
            raise ThreelcError(f"engine returned dtype {r.dtype} for a tensor of dtype {code}",
                               EINTERNAL)
        return _result_array(r, np_dtype)

    return finish


def allgather(array: np.ndarray, *, name: Optional[str] = None,
              dtype: DTypeLike = None) -> Handle:
    """Submits an allgather: every rank's `array` concatenated along the first dimension
    (whose length may differ between ranks). ``wait()`` returns a new array."""
    array = _array(array)
    code = dtype_code(array, dtype)
    raw_name = _name_bytes(name)
    tensor, shape = _tensor(array, code, raw_name, None)
    options = _options()
    return _submit("threelc_allgather", "allgather", name, tensor, options,
                   (array, shape, raw_name), _engine_result(array, code))


def reducescatter(array: np.ndarray, *, name: Optional[str] = None, op=Sum,
                  prescale: float = 1.0, postscale: float = 1.0,
                  dtype: DTypeLike = None) -> Handle:
    """Submits a reducescatter: the reduction of `array` over the ranks, of which rank r
    gets the r-th part of the first dimension (the first dim0 % size ranks one row more).
    ``wait()`` returns a new array."""
    array = _array(array)
    code = dtype_code(array, dtype)
    raw_name = _name_bytes(name)
    tensor, shape = _tensor(array, code, raw_name, None)
    options = _options(op=op, prescale=prescale, postscale=postscale)
    return _submit("threelc_reducescatter", "reducescatter", name, tensor, options,
                   (array, shape, raw_name), _engine_result(array, code))


def alltoall(array: np.ndarray, splits: Optional[Sequence[int]] = None, *,
             name: Optional[str] = None, dtype: DTypeLike = None) -> Handle:
    """Submits an alltoall: rows ``splits[j]`` of the first dimension go to rank j (None:
    equal parts). ``wait()`` returns ``(received rows in rank order, received_splits)``."""
    array = _array(array)
    code = dtype_code(array, dtype)
    raw_name = _name_bytes(name)
    tensor, shape = _tensor(array, code, raw_name, None)
    split_array = None
    if splits is not None:
        split_array = np.ascontiguousarray(np.asarray(splits), dtype=np.int64)
        if split_array.ndim != 1:
            raise ValueError(f"splits must be 1-D, got shape {split_array.shape}")
    options = _options(splits=split_array)
    as_array = _engine_result(array, code)

    def finish(hid: int):
        r = _result(hid)
        data = as_array(hid)
        if r.nsplits < 0 or (r.nsplits and not r.received_splits):
            raise ThreelcError("engine returned no received splits for an alltoall", EINTERNAL)
        received = np.array([r.received_splits[i] for i in range(r.nsplits)], dtype=np.int64)
        return data, received

    return _submit("threelc_alltoall", "alltoall", name, tensor, options,
                   (array, shape, raw_name, split_array), finish)


def barrier() -> Handle:
    """Submits a barrier; ``wait()`` returns None once every rank has submitted one."""
    return _submit("threelc_barrier", "barrier", None, None, None, (), lambda hid: None)


def flush() -> None:
    """A hint that what this rank has submitted is all it will submit for now: the engine
    negotiates it at once instead of at its next cycle (THREELC_CYCLE_TIME_MS)."""
    _check(_fn("threelc_flush")(), "threelc_flush")


def join() -> Handle:
    """Submits a join (this rank has no more data); ``wait()`` returns the last rank to
    join once every rank has joined."""
    return _submit("threelc_join", "join", None, None, None, (),
                   lambda hid: int(_result(hid).last_joined_rank))
