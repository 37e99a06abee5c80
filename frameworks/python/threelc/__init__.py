"""threelc: 3LC gradient compression (Lim, Andersen, Kaminsky, MLSys 2019).

The package loads libthreelc.so with ctypes (see :mod:`threelc._library` for where it
looks; ``THREELC_LIBRARY`` overrides). :mod:`threelc.codec` binds the codec to numpy,
:mod:`threelc.engine` the engine's C ABI (handles, submissions), :mod:`threelc.dtypes` names
the element types both share, and :mod:`threelc.numpy` is the Horovod-style functional API on
numpy arrays (``import threelc.numpy as hvd``);
:mod:`threelc.torch` is Horovod's PyTorch API (``import threelc.torch as hvd``), imported on
demand since it needs torch.

The engine's lifecycle, identity, ops and compression choices are also exported here:
``threelc.init()``, ``threelc.rank()``, ``threelc.Sum``, ``threelc.Compression.threelc``, ...
"""

from ._library import lib as _lib
from . import codec
from . import engine
from .engine import (Average, Compression, Handle, Max, Min, Product, Sum, ThreelcError,
                     cross_rank, cross_size, init, is_initialized, local_rank, local_size, rank,
                     shutdown, size, statistics)

__version__ = _lib.threelc_version().decode()

__all__ = [
    "codec", "engine", "__version__",
    "init", "shutdown", "is_initialized", "rank", "size", "local_rank", "local_size",
    "cross_rank", "cross_size", "statistics",
    "ThreelcError", "Handle", "Sum", "Average", "Min", "Max", "Product", "Compression",
]
