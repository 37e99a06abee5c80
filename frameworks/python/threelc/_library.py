"""Locates and loads libthreelc.so with ctypes and declares the C ABI it exports.

Search order:

1. ``THREELC_LIBRARY``: the path of the library to load. When set it is the only
   candidate; a path that does not exist or does not load is an error naming it.
2. ``libthreelc.so`` in the package's own directories (``threelc.__path__``): where
   ``pip install`` puts it (under ``pip install -e``, the copy in site-packages, whose
   directory comes before the checkout's in ``__path__``).
3. The repository's build tree, ``<repo>/build/lib/libthreelc.so``, when the package is a
   checkout's ``frameworks/python/threelc`` (``tools/build.sh`` builds it there).

Nothing else (no ``LD_LIBRARY_PATH`` search), so the library that is loaded is always
the one the error message would name. ctypes keeps the package independent of the
Python and torch versions in use.
"""

from __future__ import annotations

import ctypes
import os
import sys
from pathlib import Path

__all__ = ["lib", "path", "candidates", "BUILD_HINT"]

LIBRARY_NAME = "libthreelc.so"
ENV_VAR = "THREELC_LIBRARY"
BUILD_HINT = (
    "install the package with `pip install .` in the repository root, or build the library "
    "with `tools/build.sh` (or `cmake -S . -B build -G Ninja && cmake --build build`), as the "
    f"README says, or set {ENV_VAR} to the path of {LIBRARY_NAME}"
)

_PACKAGE_DIR = Path(__file__).resolve().parent


def _package_dirs() -> list[Path]:
    """The package's directories: its __path__ (several under an editable install)."""
    package = sys.modules.get(__package__)
    dirs = [Path(p).resolve() for p in getattr(package, "__path__", None) or []]
    return dirs or [_PACKAGE_DIR]


def _checkout_build_dir() -> Path | None:
    """<repo>/build/lib when this package is a checkout's frameworks/python/threelc."""
    repo = _PACKAGE_DIR.parents[2]
    if _PACKAGE_DIR == repo / "frameworks" / "python" / "threelc" and \
            (repo / "CMakeLists.txt").is_file():
        return repo / "build" / "lib"
    return None


def candidates() -> list[Path]:
    """Paths tried when THREELC_LIBRARY is not set, in order."""
    found = [d / LIBRARY_NAME for d in _package_dirs()]
    build = _checkout_build_dir()
    if build is not None:
        found.append(build / LIBRARY_NAME)
    return list(dict.fromkeys(found))


def _load() -> tuple[ctypes.CDLL, Path]:
    override = os.environ.get(ENV_VAR)
    if override:
        p = Path(override)
        if not p.is_file():
            raise ImportError(f"{ENV_VAR}={override!r}: no such file; point {ENV_VAR} at a "
                              f"built {LIBRARY_NAME} or unset it to load the package's own "
                              f"copy (`pip install .`) or the checkout's build/lib "
                              f"(`tools/build.sh`)")
        try:
            return ctypes.CDLL(str(p)), p
        except OSError as exc:
            raise ImportError(f"{ENV_VAR}={override!r} could not be loaded: {exc}") from exc
    tried = candidates()
    for p in tried:
        if p.is_file():
            try:
                return ctypes.CDLL(str(p)), p
            except OSError as exc:
                raise ImportError(f"{p} exists but could not be loaded: {exc}") from exc
    looked = ", ".join(str(p) for p in tried)
    raise ImportError(f"{LIBRARY_NAME} not found (looked in: {looked}); {BUILD_HINT}")


def _declare(lib: ctypes.CDLL) -> None:
    c_size_p = ctypes.POINTER(ctypes.c_size_t)
    c_float_p = ctypes.POINTER(ctypes.c_float)
    sigs = {
        "threelc_version": (ctypes.c_char_p, []),
        "threelc_codec_max_block_bytes": (ctypes.c_size_t, [ctypes.c_size_t]),
        # values, dtype, count, error, sparsity, out, out_capacity, block_bytes
        "threelc_codec_encode": (
            ctypes.c_int,
            [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t, c_float_p, ctypes.c_float,
             ctypes.c_void_p, ctypes.c_size_t, c_size_p],
        ),
        # values, dtype, count, error, sparsity, scale_tile, out, out_capacity, block_bytes
        "threelc_codec_encode_tiled": (
            ctypes.c_int,
            [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t, c_float_p, ctypes.c_float,
             ctypes.c_size_t, ctypes.c_void_p, ctypes.c_size_t, c_size_p],
        ),
        # values, dtype, count, out, out_capacity, block_bytes
        "threelc_codec_encode_raw": (
            ctypes.c_int,
            [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_size_t,
             c_size_p],
        ),
        # block, block_bytes, count, format, scale
        "threelc_codec_inspect": (
            ctypes.c_int,
            [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_uint32),
             ctypes.POINTER(ctypes.c_int), c_float_p],
        ),
        # block, block_bytes, expected_count, dst
        "threelc_codec_decode": (
            ctypes.c_int, [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t, c_float_p]),
        # block, block_bytes, expected_count, alpha, dst
        "threelc_codec_decode_add": (
            ctypes.c_int,
            [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_float, c_float_p],
        ),
        "threelc_codec_isa": (ctypes.c_char_p, []),
        "threelc_codec_last_error": (ctypes.c_char_p, []),
    }
    for name, (restype, argtypes) in sigs.items():
        try:
            fn = getattr(lib, name)
        except AttributeError as exc:
            raise ImportError(f"{path} does not export {name}; rebuild the library") from exc
        fn.restype = restype
        fn.argtypes = argtypes


lib, path = _load()
_declare(lib)
