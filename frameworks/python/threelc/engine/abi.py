"""The engine's C ABI (``threelc/threelc.h``) as ctypes declarations: the structs, the
function signatures, and the lookup that declares a function on first use.

Structs mirror the header field for field; the header promises they only grow at their end,
which :func:`_initialized_struct` relies on. Functions are looked up when first called, not
at import, so that a library built without the engine (codec only) still imports.
"""

from __future__ import annotations

import ctypes
import threading
from typing import Optional

from .. import _library
from .._library import lib
from .errors import EINTERNAL, ThreelcError, error_name

__all__ = ["MAX_DIMS", "last_error"]

MAX_DIMS = 8  # THREELC_MAX_DIMS
_DEVICE_CPU = -1  # THREELC_DEVICE_CPU

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
        ("process_set", ctypes.c_int),
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
        ("process_set", ctypes.c_int),
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
    "threelc_nccl_version": (ctypes.c_int, []),
    "threelc_rank": (ctypes.c_int, []),
    "threelc_size": (ctypes.c_int, []),
    "threelc_local_rank": (ctypes.c_int, []),
    "threelc_local_size": (ctypes.c_int, []),
    "threelc_cross_rank": (ctypes.c_int, []),
    "threelc_cross_size": (ctypes.c_int, []),
    "threelc_is_homogeneous": (ctypes.c_int, []),
    "threelc_allreduce": (_handle_t, [ctypes.POINTER(_Tensor), ctypes.POINTER(_Options)]),
    "threelc_push_pull": (_handle_t, [ctypes.POINTER(_Tensor), ctypes.POINTER(_Options)]),
    "threelc_broadcast": (_handle_t, [ctypes.POINTER(_Tensor), ctypes.POINTER(_Options)]),
    "threelc_allgather": (_handle_t, [ctypes.POINTER(_Tensor), ctypes.POINTER(_Options)]),
    "threelc_reducescatter": (_handle_t, [ctypes.POINTER(_Tensor), ctypes.POINTER(_Options)]),
    "threelc_alltoall": (_handle_t, [ctypes.POINTER(_Tensor), ctypes.POINTER(_Options)]),
    "threelc_barrier": (_handle_t, []),
    "threelc_barrier_set": (_handle_t, [ctypes.c_int]),
    "threelc_join": (_handle_t, []),
    "threelc_add_process_set": (_handle_t, [ctypes.POINTER(ctypes.c_int), ctypes.c_int]),
    "threelc_remove_process_set": (_handle_t, [ctypes.c_int]),
    "threelc_process_set_size": (ctypes.c_int, [ctypes.c_int]),
    "threelc_process_set_rank": (ctypes.c_int, [ctypes.c_int]),
    "threelc_process_set_included": (ctypes.c_int, [ctypes.c_int]),
    "threelc_process_set_ranks": (ctypes.c_int, [ctypes.c_int, ctypes.POINTER(ctypes.c_int),
                                                 ctypes.c_int]),
    "threelc_process_set_ids": (ctypes.c_int, [ctypes.POINTER(ctypes.c_int), ctypes.c_int]),
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
