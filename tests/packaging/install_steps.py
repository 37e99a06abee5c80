"""What the packaging tests share: the Python that makes virtual environments, their work
folder, the environment of an install step and running one step with its output kept for the
failure message."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from support.rank_jobs import tail

# ctest sets these (tests/CMakeLists.txt); by hand they default to python3.11 on PATH and a
# folder under /tmp.
VENV_PYTHON = os.environ.get("THREELC_VENV_PYTHON") or shutil.which("python3.11")
WORK = Path(os.environ.get("THREELC_PACKAGING_WORK", "/tmp/threelc-packaging"))
# The CMake settings a wheel is built with: the Release build's compilers (ctest passes them; by
# hand, CMake's own first choices) and -Werror, which pyproject.toml turns off. scikit-build-core
# would take Python's gcc/g++ where CMake took cc/c++; with the same compilers and flags, ccache
# (when installed) hands the wheel's build the objects of build/.
RELEASE_BUILD = {"CMAKE_C_COMPILER": os.environ.get("THREELC_RELEASE_CC", "cc"),
                 "CMAKE_CXX_COMPILER": os.environ.get("THREELC_RELEASE_CXX", "c++"),
                 "THREELC_WERROR": "ON"}


def clean_env(**extra: str) -> dict:
    """This environment without what would let Python find the package other than by
    installing it (PYTHONPATH, THREELC_LIBRARY) or tie it to another environment."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "THREELC_LIBRARY", "VIRTUAL_ENV", "PYTHONHOME")}
    env.update(extra)
    return env


def step(what: str, command: list, timeout: float, env: dict | None = None,
         cwd: Path | None = None, expect_ok: bool = True) -> subprocess.CompletedProcess:
    """Runs one step; fails the test naming it, with the output's tail, when its exit status is
    not the expected one. Prints how long it took (pytest -s, or ctest -V)."""
    started = time.monotonic()
    # A session of its own: on a timeout pip's build (cmake, ninja, compilers) is killed too.
    child = subprocess.Popen([str(c) for c in command], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, start_new_session=True,
                             env=env if env is not None else clean_env(),
                             cwd=None if cwd is None else str(cwd))
    try:
        stdout, stderr = child.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        stdout, stderr = child.communicate()
        pytest.fail(f"{what}: still running after {timeout:g} s (killed)\n--- output ---\n"
                    f"{tail(stdout or '')}\n{tail(stderr or '')}", pytrace=False)
    proc = subprocess.CompletedProcess(child.args, child.returncode, stdout, stderr)
    print(f"packaging: {what}: {time.monotonic() - started:.1f} s (exit {proc.returncode})")
    if (proc.returncode == 0) != expect_ok:
        pytest.fail(f"{what}: exit {proc.returncode}\n$ {' '.join(map(str, command))}\n"
                    f"--- stdout ---\n{tail(proc.stdout, 80)}\n--- stderr ---\n"
                    f"{tail(proc.stderr, 80)}", pytrace=False)
    return proc


def venv_env(venv: Path) -> dict:
    """The environment of a shell that activated `venv`."""
    return clean_env(PATH=f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
                     VIRTUAL_ENV=str(venv))


def installed_package(venv: Path) -> Path:
    """The threelc folder in `venv`'s site-packages (the library's, for an editable install)."""
    found = sorted(venv.glob("lib/python3*/site-packages/threelc"))
    assert len(found) == 1, f"threelc is not installed once in {venv}: {found}"
    return found[0].resolve()
