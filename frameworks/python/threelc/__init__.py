"""threelc: 3LC gradient compression (Lim, Andersen, Kaminsky, MLSys 2019).

The package loads libthreelc.so with ctypes (see :mod:`threelc._library` for where it
looks; ``THREELC_LIBRARY`` overrides). :mod:`threelc.codec` binds the codec to numpy.
"""

from ._library import lib as _lib
from . import codec

__version__ = _lib.threelc_version().decode()

__all__ = ["codec", "__version__"]
