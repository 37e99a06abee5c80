"""The THREELC_E* codes of the C ABI and :class:`ThreelcError`, which carries one.

The codes mirror the C enum of every code, ``threelc/error_codes.h`` (ctypes cannot read a
header).
tests/frameworks/python/test_abi_constants.py checks them against the headers.
"""

from __future__ import annotations

__all__ = [
    "ThreelcError", "OK", "EINVAL", "EMALFORMED", "ENOTINIT", "ESHUTDOWN", "EMISMATCH",
    "EDUPLICATE", "EPEER", "ETIMEOUT", "EJOINED", "EINTERNAL", "error_name",
]

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

    # Tracebacks name the class where users import it from.
    __module__ = "threelc.engine"

    def __init__(self, message: str, code: int = EINTERNAL):
        super().__init__(message)
        self.code = code

    @property
    def code_name(self) -> str:
        return error_name(self.code)
