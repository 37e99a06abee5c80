"""Where the things the tests run are: the repository, the Python, the launchers, the library."""

from __future__ import annotations

import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# Debian's Python (torch 1.13 and the packages the tests use); the caller's where it is missing.
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
THREELCRUN = REPO / "tools" / "threelcrun"
TORCHRUN = REPO / "tools" / "torchrun"  # Debian's torchrun, torch 1.13's faults mended
PYTHON_PACKAGE = REPO / "frameworks" / "python"


def library_path() -> Path:
    """THREELC_LIBRARY when set, else the default build's build/lib/libthreelc.so."""
    override = os.environ.get("THREELC_LIBRARY")
    return Path(override) if override else REPO / "build" / "lib" / "libthreelc.so"


def library_available() -> bool:
    return library_path().is_file()


def with_python_package(env: dict) -> dict:
    """`env` with frameworks/python first on its PYTHONPATH (the caller's entries after it)."""
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in [str(PYTHON_PACKAGE), env.get("PYTHONPATH")] if p)
    return env
