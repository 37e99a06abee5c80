"""`pip install` of this checkout, as a user does it: a wheel built from the repository root
(pyproject.toml: scikit-build-core runs the CMake build of libthreelc.so), installed into a
fresh virtual environment with torch 2.13, then a threelcrun job of two ranks started with the
environment's own `threelcrun` console script, with neither PYTHONPATH nor THREELC_LIBRARY:
`import threelc.torch` must find the installed package and the library inside it, and its
allreduces must give the right results.

The wheel is built with the Release build's compilers and flags (install_steps.RELEASE_BUILD,
through -Ccmake.define), so that ccache, when installed, hands it the objects of build/: the
build costs a configure and a link instead of a compile."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from install_steps import RELEASE_BUILD, installed_package, step, venv_env
from support.paths import REPO
from support.rank_jobs import JobOptions, run_job

TORCH = "torch==2.13.0"  # the CPU build, from this machine's local wheels
RANK_SCRIPT = Path(__file__).resolve().parent / "installed_rank.py"
NP = 2
X = 8.0  # the ranks' inputs are integers in [-X, X]


@pytest.fixture(scope="module")
def installed(venv_python, work) -> Path:
    """A fresh virtual environment with torch 2.13 and the wheel built from this checkout."""
    venv = work / "venv"
    step("python -m venv", [venv_python, "-m", "venv", venv], timeout=120)
    pip = [venv / "bin" / "python", "-m", "pip"]
    # --no-compile: no .pyc for torch's thousands of files (half a minute here); Python compiles
    # what it imports, as it would anyway with PYTHONDONTWRITEBYTECODE.
    step(f"pip install {TORCH}", [*pip, "install", "--quiet", "--no-compile", TORCH],
         timeout=600, env=venv_env(venv))
    dist = work / "dist"
    step("pip wheel . (scikit-build-core, the CMake build of libthreelc.so)",
         [*pip, "wheel", "--no-deps", "--wheel-dir", dist, REPO,
          f"--config-settings=build-dir={work / 'wheel-build'}",
          *(f"--config-settings=cmake.define.{k}={v}" for k, v in RELEASE_BUILD.items())],
         timeout=1200, env=venv_env(venv), cwd=work)
    wheels = sorted(dist.glob("threelc-*.whl"))
    assert len(wheels) == 1, f"expected one wheel in {dist}: {wheels}"
    step("pip install <wheel>", [*pip, "install", "--quiet", "--no-compile", wheels[0]],
         timeout=300, env=venv_env(venv))
    return venv


def test_the_wheel_holds_the_package_and_its_library(installed):
    package = installed_package(installed)
    assert (package / "libthreelc.so").is_file()
    assert (package / "launcher" / "main.py").is_file()
    assert (package / "torch" / "__init__.py").is_file()
    script = installed / "bin" / "threelcrun"
    assert script.is_file() and os.access(script, os.X_OK)


def test_threelcrun_job_runs_on_the_installed_package(installed, work):
    job = run_job([installed / "bin" / "threelcrun", "-np", str(NP), "python", "-c",
                   RANK_SCRIPT.read_text()],
                  JobOptions(env=venv_env(installed), cwd=work, timeout=180, ranks=NP,
                             name="threelcrun job of the installed package"))
    assert job.returncode == 0, job.describe()
    results = [job.json_result(r) for r in range(NP)]
    package = installed_package(installed)
    for r, got in enumerate(results):
        where = f"rank {r}: {got}"
        assert (got["rank"], got["size"]) == (r, NP), where
        # the environment's own python, found on PATH, and its own copy of everything
        assert Path(got["prefix"]).resolve() == installed.resolve(), where
        assert got["torch"].startswith("2.13.0"), where
        assert Path(got["package_file"]).resolve().parent == package, where
        assert Path(got["library"]).resolve() == package / "libthreelc.so", where
        assert got["PYTHONPATH"] is None and got["THREELC_LIBRARY"] is None, where
        # exact where uncompressed; within 3LC's bound for one push_pull where compressed
        # (tests/support/torch_helpers.py, first_bound_sum: sparsity 1, n ranks)
        assert got["exact_equal"], where
        bound = (NP - 1) * X / 2 + (X + (NP - 1) * X) / 2
        assert 0 < got["packed_max_error"] <= bound, where
        # and 3LC did compress: far fewer bytes than the raw allreduce of the same tensor
        assert 0 < got["packed_bytes_sent"] * 4 < got["raw_bytes_sent"], where
    for key in ("exact_digest", "packed_digest", "threelc"):
        assert len({got[key] for got in results}) == 1, f"{key} differs across ranks: {results}"
    version = re.search(r"project\(threelc VERSION ([0-9.]+)",
                        (REPO / "CMakeLists.txt").read_text()).group(1)
    assert results[0]["threelc"] == version, results[0]
