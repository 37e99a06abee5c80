"""Loaded by pytest for every suite under tests/: puts tests/ on sys.path once, so that the
suites import what they share as ``support.<module>`` (tests/README.md lists them).

pytest 7 (Debian's) looks for conftest.py in every folder above a suite it runs, so this file
is loaded however a suite is started (ctest, or pytest by hand from any directory).
"""

from __future__ import annotations

import sys
from pathlib import Path

TESTS = str(Path(__file__).resolve().parent)
if TESTS not in sys.path:
    sys.path.insert(0, TESTS)
