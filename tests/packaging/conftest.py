"""Fixtures of the packaging tests: the Python that makes virtual environments and their
work folder (install_steps.py has the rest)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from install_steps import VENV_PYTHON, WORK


@pytest.fixture(scope="session")
def venv_python() -> str:
    if not VENV_PYTHON:
        pytest.fail("no Python to make virtual environments with: set THREELC_VENV_PYTHON or "
                    "put python3.11 on PATH", pytrace=False)
    return VENV_PYTHON


@pytest.fixture(scope="session")
def work() -> Path:
    """The packaging tests' folder, emptied once per session."""
    shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir(parents=True)
    return WORK
