"""What the srun and mpirun tests share: the jobs' environment (no THREELC_* variable but
THREELC_LIBRARY), the check of what is installed, and the checks of the example's and the kill
job's output.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import sys
from pathlib import Path

import pytest

from support.paths import REPO, library_path, with_python_package
from support.rank_jobs import RankJob

HELLO = REPO / "examples" / "hello.py"
# The training example, cut short, with the python that runs the suite (Debian's torch 1.13 in
# ctest; build/venv-torch2's python runs it on torch 2.13)
TRAINING = [sys.executable, REPO / "examples" / "train_fashion_mnist.py", "--epochs", "1",
            "--max-steps", "5", "--log-every", "5"]
DATA = Path("/usr/share/datasets/fashion-mnist")
KILL_JOB = Path(__file__).resolve().parent / "kill_job.py"
RANKS = 4
VICTIM = 2  # kill_job.py's
# Variables of an outer launcher that would make the one under test join another job.
OUTER = re.compile(r"^(SLURM_|SRUN_|SBATCH_|SALLOC_|PMIX_|PMI_|OMPI_|PRTE_|ORTE_)")
# examples/hello.py: rank, size, the average's std, the exact integer sum, the gathered shape
HELLO_LINE = re.compile(r"^(\d+) (\d+) (\d+\.\d+ \[[\d, ]+\] \(\d+, \d+\))$")
# Searched after PATH: the daemons are in /usr/sbin, which a user's PATH may lack.
SBIN = ["/usr/sbin", "/sbin", "/usr/bin"]


def require(binaries: dict[str, str], libraries: dict[str, str] = None,
            needs_root: str = None) -> dict[str, str]:
    """binary -> its path, for `binaries` (binary -> its Debian package). Skips the module,
    naming the packages to install, when one of them or of `libraries` (a glob -> its
    package) is missing, or when `needs_root` (why) and this is not root. In CI (CI=true) a
    missing package fails instead: these tests must run there."""
    path = os.pathsep.join([os.environ.get("PATH", ""), *SBIN])
    found = {b: shutil.which(b, path=path) for b in binaries}
    missing = sorted({binaries[b] for b, p in found.items() if p is None}
                     | {package for pattern, package in (libraries or {}).items()
                        if not glob.glob(pattern)})
    if missing:
        absent = [b for b, p in found.items() if p is None]
        absent += [pattern for pattern in libraries or {} if not glob.glob(pattern)]
        why = (f"missing {', '.join(absent)}: install the Debian package(s) "
               f"{' '.join(missing)} (tools/setup.sh --tests does)")
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI: {why}", pytrace=False)
        pytest.skip(why, allow_module_level=True)
    if needs_root and os.geteuid() != 0:
        pytest.skip(f"not root: {needs_root}", allow_module_level=True)
    return found


def job_env(**extra: str) -> dict:
    """The environment of a job: this one without any THREELC_* variable (THREELC_LIBRARY
    kept) or an outer launcher's, with frameworks/python on PYTHONPATH, one torch thread per
    rank, and `extra`."""
    env = {k: v for k, v in os.environ.items()
           if not (k.startswith("THREELC_") or OUTER.match(k))}
    env["THREELC_LIBRARY"] = str(library_path())
    env["OMP_NUM_THREADS"] = "1"
    env.update(extra)
    return with_python_package(env)


def check_hello(job: RankJob) -> None:
    """Every rank printed hello.py's one line, with its rank, the job's size and the same
    results as every other rank."""
    assert job.returncode == 0, job.describe()
    results = set()
    for rank in range(RANKS):
        lines = [m for m in map(HELLO_LINE.match, job.lines[rank]) if m]
        assert len(lines) == 1, f"rank {rank}: no one hello line\n{job.describe()}"
        got_rank, size, result = lines[0].groups()
        assert (int(got_rank), int(size)) == (rank, RANKS), job.describe()
        results.add(result)
    assert len(results) == 1, f"the ranks disagree: {results}\n{job.describe()}"
    # sum of arange(4) * rank over ranks 0..3; rows gathered: 1 + 2 + 3 + 4
    assert results.pop().endswith("[0, 6, 12, 18] (10, 2)"), job.describe()


def check_training(job: RankJob) -> None:
    assert job.returncode == 0, job.describe()
    summary = job.json_result(0)
    assert summary["ranks"] == RANKS and summary["steps"] == 5, summary
    assert summary["compression"] == "threelc" and summary["compression_ratio"] > 10, summary


def check_killed(job: RankJob) -> None:
    """kill_job.py's end: every survivor raised a ThreelcError naming the victim, the
    launcher exited non-zero."""
    assert job.returncode != 0, job.describe()
    for rank in range(RANKS):
        lines = job.lines[rank]
        assert "FIRST DONE" in lines, f"rank {rank} did not pass the first allreduce\n" \
                                      f"{job.describe()}"
        errors = [l for l in lines if l.startswith("ERROR ")]
        if rank == VICTIM:
            assert not errors, job.describe()
            continue
        assert "NOERROR" not in lines, f"rank {rank} missed the death\n{job.describe()}"
        assert len(errors) == 1, f"rank {rank} printed no ThreelcError\n{job.describe()}"
        assert re.search(rf"\brank {VICTIM}\b", errors[0]), job.describe()
