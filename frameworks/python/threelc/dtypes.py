"""The element types of the C ABI (``threelc_dtype``), their numpy dtypes, and the check that
turns an array (and an optional dtype argument) into the code the C structs carry.

``DTYPES`` is the one Python declaration of the numbering: :mod:`threelc.engine`,
:mod:`threelc.codec` and :mod:`threelc.torch` derive their tables from it. It mirrors the C
enum ``threelc_dtype`` (``compression/include/threelc/codec.h``, which the engine's
``threelc/threelc.h`` includes) because ctypes cannot read a C header and the library exports
no function that names the codes. tests/frameworks/python/test_abi_constants.py reads the
header and fails when the two disagree.
"""

from __future__ import annotations

from typing import Union

import numpy as np

__all__ = ["DTYPES", "BFLOAT16", "NUMPY_CODES", "DTypeLike", "dtype_code"]

# threelc_dtype: name -> code, in the enum's order (the codes are the ABI's: new types go last).
DTYPES = {
    "uint8": 0, "int8": 1, "int32": 2, "int64": 3,
    "float16": 4, "bfloat16": 5, "float32": 6, "float64": 7, "int16": 8,
    "bool": 9,  # moved (broadcast, allgather, alltoall), never reduced: the engine refuses it
}
BFLOAT16 = DTYPES["bfloat16"]  # numpy has no bfloat16: its arrays carry the bits as 16-bit ints
NUMPY_CODES = {np.dtype(name): code for name, code in DTYPES.items() if code != BFLOAT16}

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
        if code == BFLOAT16:
            if adt.name == "bfloat16" or (adt.kind in "ui" and adt.itemsize == 2):
                if not adt.isnative:
                    raise TypeError(f"array has non-native byte order ({adt})")
                return code
            raise TypeError(f"dtype='bfloat16' needs an array of bf16 bit patterns (uint16 or "
                            f"int16, or an ml_dtypes bfloat16 array), got {adt}")
        if NUMPY_CODES.get(adt) != code:
            raise TypeError(f"dtype={name!r} does not match the array's dtype {adt}")
        return code
    if adt.name == "bfloat16" and adt.itemsize == 2:  # ml_dtypes.bfloat16
        return BFLOAT16
    code = NUMPY_CODES.get(adt)
    if code is None:
        hint = (" (for bfloat16 pass the bits as uint16 with dtype='bfloat16')"
                if adt == np.dtype(np.uint16) else "")
        raise TypeError(f"array dtype {adt} is not supported: expected one of "
                        f"{', '.join(DTYPES)} in native byte order{hint}")
    return code
