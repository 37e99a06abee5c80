"""`pip install -e .`, the development install, in a fresh virtual environment (numpy only):
its ranks import the checkout's Python files and the library the editable build installed,
with neither PYTHONPATH nor THREELC_LIBRARY set by the caller."""

from __future__ import annotations

import json
from pathlib import Path

from install_steps import RELEASE_BUILD, installed_package, step, venv_env
from support.paths import PYTHON_PACKAGE, REPO
from support.rank_jobs import JobOptions, run_job

NP = 2
RANK = """
import json, numpy as np, threelc, threelc._library, threelc.numpy as tn
threelc.init()
total = tn.allreduce(np.full(4, threelc.rank() + 1, np.float32), name="t", op=threelc.Sum)
print(json.dumps({"package_file": threelc.__file__, "library": str(threelc._library.path),
                  "total": total.tolist()}))
threelc.shutdown()
"""


def test_editable_install_runs_the_checkouts_files(venv_python, work):
    venv = work / "venv-editable"
    step("python -m venv (editable)", [venv_python, "-m", "venv", venv], timeout=120)
    step("pip install -e .",
         [venv / "bin" / "python", "-m", "pip", "install", "--quiet", "--no-compile", "-e",
          REPO, f"--config-settings=build-dir={work / 'editable-build'}",
          *(f"--config-settings=cmake.define.{k}={v}" for k, v in RELEASE_BUILD.items())],
         timeout=1200, env=venv_env(venv), cwd=work)
    job = run_job([venv / "bin" / "threelcrun", "-np", str(NP), "python", "-c", RANK],
                  JobOptions(env=venv_env(venv), cwd=work, timeout=120, ranks=NP,
                             name="threelcrun job of the editable install"))
    assert job.returncode == 0, job.describe()
    for r in range(NP):
        got = job.json_result(r)
        assert Path(got["package_file"]).resolve() == \
            (PYTHON_PACKAGE / "threelc" / "__init__.py").resolve(), got
        assert Path(got["library"]).resolve() == installed_package(venv) / "libthreelc.so", got
        assert got["total"] == [3.0] * 4, json.dumps(got)
