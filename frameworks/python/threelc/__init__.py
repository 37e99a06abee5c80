"""threelc: 3LC gradient compression (Lim, Andersen, Kaminsky, MLSys 2019).

The package loads libthreelc.so with ctypes (see :mod:`threelc._library` for where it
looks; ``THREELC_LIBRARY`` overrides). :mod:`threelc.codec` binds the codec to numpy,
:mod:`threelc.engine` the engine's C ABI (handles, submissions), :mod:`threelc.dtypes` names
the element types both share, and :mod:`threelc.numpy` is the Horovod-style functional API on
numpy arrays (``import threelc.numpy as hvd``);
:mod:`threelc.torch` is Horovod's PyTorch API (``import threelc.torch as hvd``), imported on
demand since it needs torch. :mod:`threelc.launcher` is ``threelcrun``.

The engine's lifecycle, identity, ops and compression choices are also exported here:
``threelc.init()``, ``threelc.rank()``, ``threelc.Sum``, ``threelc.Compression.threelc``, ...

``import threelc`` itself loads nothing: the library (and numpy) are loaded by the first
module that needs them (``threelc.codec``, ``threelc.engine`` and what imports them) or by the
first use of a name below, so that the launcher runs with the standard library alone. A
library that cannot be found or loaded raises ImportError there, naming what was tried.
"""

import importlib

# The names exported here, and the module each comes from (imported on first use).
_EXPORTS = {
    "codec": None,
    "engine": None,
    **{name: "engine" for name in (
        "init", "shutdown", "is_initialized", "rank", "size", "local_rank", "local_size",
        "cross_rank", "cross_size", "statistics",
        "ThreelcError", "Handle", "Sum", "Average", "Min", "Max", "Product", "Compression")},
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name):
    if name == "__version__":
        value = _version()
    elif name in _EXPORTS:
        module = importlib.import_module(f".{_EXPORTS[name] or name}", __name__)
        value = module if _EXPORTS[name] is None else getattr(module, name)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def _version() -> str:
    """The library's version; where it cannot be loaded, the installed package's (so that
    ``getattr(threelc, "__version__", None)`` and ``hasattr`` never raise ImportError)."""
    try:
        from ._library import lib
        return lib.threelc_version().decode()
    except ImportError as error:
        from importlib import metadata
        try:
            return metadata.version("threelc")
        except metadata.PackageNotFoundError:
            raise AttributeError(f"threelc.__version__: neither the library nor an installed "
                                 f"package tells it ({error})") from error


def __dir__():
    return sorted(set(globals()) | set(__all__))
