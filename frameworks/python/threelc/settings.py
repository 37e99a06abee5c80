"""Every environment variable threelc reads, each declared once.

The library's layers (engine, transport, compression) declare theirs in C++ tables that the C
ABI lists (``threelc_setting_count`` / ``threelc_setting_at``); the package's own variable,
``THREELC_LIBRARY``, is declared here, since it is read before the library is loaded.
``tools/dev/settings_doc.py`` writes README.md's and docs/CONFIGURATION.md's tables from these
rows (and the launcher's, ``threelc/launcher/settings.py``), and a test checks them.

``value(name)`` is the text a variable has in this process: its value when set and non-empty,
else the default its layer declares; Python code that needs a library setting's value before
the engine starts (``threelc.torch`` under torchrun) reads it here rather than repeating the
default.
"""

from __future__ import annotations

import ctypes
import os
from typing import NamedTuple

from . import _library

__all__ = ["Setting", "PACKAGE_SETTINGS", "library_settings", "all_settings", "value"]


class Setting(NamedTuple):
    name: str
    layer: str     # "engine", "transport", "compression", "python", "launcher"
    type: str      # "bytes", "seconds", "flag", "choice", "text", ...
    default: str   # as a user would write it; "" = unset
    accepted: str  # the values accepted, as a refusal says it
    meaning: str   # one line of Markdown (README.md)
    details: str   # the whole story (docs/CONFIGURATION.md); "": the meaning


PACKAGE_SETTINGS = (
    Setting("THREELC_LIBRARY", "python", "text", "", "a path to libthreelc.so",
            "the `libthreelc.so` the Python package loads; unset: the copy inside the installed "
            "package (`pip install`), else `build/lib/libthreelc.so` of this checkout",
            "the `libthreelc.so` the Python package loads. Unset: `libthreelc.so` in the "
            "package's directory (where `pip install` puts it), else `build/lib/libthreelc.so` of "
            "the checkout the package lies in; "
            "a set path that does not exist or does not load is an error naming it"),
)


class _SettingStruct(ctypes.Structure):
    # Mirrors threelc_setting in threelc/threelc.h (ctypes cannot read the header); the
    # settings test checks every field against the docs the C tables generate.
    _fields_ = [(field, ctypes.c_char_p) for field in
                ("name", "layer", "type", "default_value", "accepted", "meaning", "details")]


def _declare(lib: ctypes.CDLL) -> None:
    lib.threelc_setting_count.restype = ctypes.c_int
    lib.threelc_setting_count.argtypes = []
    lib.threelc_setting_at.restype = ctypes.c_int
    lib.threelc_setting_at.argtypes = [ctypes.c_int, ctypes.POINTER(_SettingStruct)]


def library_settings() -> list[Setting]:
    """The rows of the library's tables: engine, transport, compression, in that order."""
    lib = _library.lib
    _declare(lib)
    rows = []
    for index in range(lib.threelc_setting_count()):
        out = _SettingStruct()
        if lib.threelc_setting_at(index, ctypes.byref(out)) != 0:
            raise RuntimeError(f"threelc_setting_at({index}) failed")
        rows.append(Setting(*(getattr(out, field).decode() for field, _ in out._fields_)))
    return rows


def all_settings() -> list[Setting]:
    """The library's rows, then the package's."""
    return library_settings() + list(PACKAGE_SETTINGS)


def value(name: str) -> str:
    """The text of variable `name` in this process: its value when set and non-empty, else its
    declared default. KeyError for a name no table declares."""
    for row in all_settings():
        if row.name == name:
            text = os.environ.get(name, "")
            return text if text else row.default
    raise KeyError(f"{name} is not declared in any of threelc's settings tables")
