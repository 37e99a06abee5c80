"""threelc's examples under Open MPI's mpirun, with no THREELC_* variable: the ranks find each
other through mpirun's PMIx server, rank and size from its OMPI_COMM_WORLD_* variables. A rank
killed in a job is named by every other rank; THREELC_IFACE=::1 moves the whole job (its
coordinator too) to IPv6.

Run: PYTHONPATH=frameworks/python /usr/bin/python3 -m pytest -q tests/launchers/test_mpirun.py
"""

from __future__ import annotations

from pathlib import Path

import pytest

from launched_jobs import (DATA, HELLO, KILL_JOB, RANKS, TRAINING, check_hello,
                           check_killed, check_training, job_env, require)
from support.paths import PYTHON
from support.rank_jobs import MPIRUN_PREFIX, JobOptions, run_job

MPIRUN = require({"mpirun": "openmpi-bin"})["mpirun"]
SOCKETS_JOB = Path(__file__).resolve().parent / "sockets_job.py"
TIMEOUT = 60  # seconds, each job


def mpirun(*args, env=None, timeout=TIMEOUT):
    command = [MPIRUN, "--allow-run-as-root", "--oversubscribe", "--bind-to", "none",
               "--tag-output", "-np", str(RANKS), *map(str, args)]
    return run_job(command, JobOptions(env=env or job_env(), timeout=timeout, ranks=RANKS,
                                       prefix=MPIRUN_PREFIX,
                                       name=f"mpirun -np {RANKS} {' '.join(map(str, args))}"))


def test_hello():
    check_hello(mpirun(PYTHON, HELLO))


@pytest.mark.skipif(not DATA.is_dir(), reason=f"{DATA} missing (dataset-fashion-mnist)")
def test_training_example():
    check_training(mpirun(*TRAINING, timeout=120))


def test_killed_rank_is_named():
    """mpirun ends the job (SIGTERM, then SIGKILL after odls_base_sigkill_timeout) as soon as
    it sees rank 2 die; the survivors ignore the SIGTERM so that they report the death as a
    training script would, within those 2 s. (Open MPI 4.1's `--mca
    orte_abort_on_non_zero_status 0`, which would let them run on, leaves mpirun waiting
    forever once a rank has died of a signal.)"""
    check_killed(mpirun("--mca", "odls_base_sigkill_timeout", "2", PYTHON, KILL_JOB,
                        "--ignore-sigterm"))


def test_ipv6_coordinator():
    """THREELC_IFACE=::1: every rank's connections (to the coordinator and its peers) are on
    ::1, none on 127.0.0.1."""
    job = mpirun(PYTHON, SOCKETS_JOB, env=job_env(THREELC_IFACE="::1"))
    assert job.returncode == 0, job.describe()
    for rank, lines in job.prefixed("SOCKETS ").items():
        assert len(lines) == 1, f"rank {rank}\n{job.describe()}"
        _, _, v4, _, v6 = lines[0].split()
        assert int(v4) == 0 and int(v6) >= RANKS - 1, f"rank {rank}: {lines[0]}\n" \
                                                       f"{job.describe()}"


# Rank 2 starts threelc only after the others have given up waiting for it at the fence.
LATE_START = """import os, sys, time, threelc
if os.environ["OMPI_COMM_WORLD_RANK"] == "2":
    time.sleep(8)
try:
    threelc.init()
except threelc.ThreelcError as e:
    print("ERROR", e, flush=True)
    time.sleep(1)  # the others print theirs before mpirun stops the job on this exit
    sys.exit(1)
print("NOERROR", flush=True)
"""


def test_a_rank_that_never_reaches_the_fence_times_out():
    """Nothing waits for ever at the launcher's fence: the ranks that reached it fail at
    THREELC_START_TIMEOUT, saying that not every rank did (mpirun then stops rank 2)."""
    job = mpirun(PYTHON, "-c", LATE_START, env=job_env(THREELC_START_TIMEOUT="2"))
    assert job.returncode != 0, job.describe()
    for rank in (0, 1, 3):
        lines = job.prefixed("ERROR ").get(rank, [])
        assert lines and "fence did not complete within 2 s (THREELC_START_TIMEOUT): not all " \
            f"{RANKS} ranks reached it" in lines[0], f"rank {rank}\n{job.describe()}"
    assert job.seconds < 8, job.describe()
