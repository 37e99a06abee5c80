"""threelc's examples under Slurm's srun and sbatch, with no THREELC_* variable: the ranks
find each other through Slurm's wire-up service (PMIx by the cluster's MpiDefault, and PMI-2
with --mpi=pmi2), rank and size from srun's variables. A rank killed in a job is named by every
other rank; a job with no wire-up service (--mpi=none) says what to set.

Each job runs on a throwaway single-node cluster (slurm_cluster.py) and is bounded.

Run (as root, with tools/setup.sh --tests's Slurm packages):
PYTHONPATH=frameworks/python /usr/bin/python3 -m pytest -q tests/launchers/test_srun.py
"""

from __future__ import annotations

import pytest

from launched_jobs import (DATA, HELLO, KILL_JOB, RANKS, TRAINING, check_hello,
                           check_killed, check_training, job_env)
from support.paths import PYTHON
from support.rank_jobs import SRUN_PREFIX, JobOptions, RankJob, run_job

TIMEOUT = 60  # seconds, each job


def srun(cluster, *args, env=None, timeout=TIMEOUT):
    env = {**(env or job_env()), "SLURM_CONF": cluster.env["SLURM_CONF"]}
    return run_job([cluster.bin["srun"], "-l", *map(str, args)],
                   JobOptions(env=env, timeout=timeout, ranks=RANKS, prefix=SRUN_PREFIX,
                              name=f"srun {' '.join(map(str, args))}"))


@pytest.mark.parametrize("mpi", ["default", "pmi2"])
def test_hello(slurm_cluster, mpi):
    """MpiDefault=pmix, and Slurm's own PMI-2."""
    mpi_args = [] if mpi == "default" else [f"--mpi={mpi}"]
    check_hello(srun(slurm_cluster, *mpi_args, "-n", RANKS, PYTHON, HELLO))


@pytest.mark.skipif(not DATA.is_dir(), reason=f"{DATA} missing (dataset-fashion-mnist)")
def test_training_example(slurm_cluster):
    check_training(srun(slurm_cluster, "-n", RANKS, *TRAINING, timeout=120))


def test_sbatch_script(slurm_cluster, tmp_path):
    """A batch script whose srun starts the ranks in the job's allocation."""
    script = tmp_path / "job.sh"
    script.write_text(f"#!/bin/sh\nexec srun -l {PYTHON} {HELLO}\n")
    out, err = tmp_path / "out", tmp_path / "err"
    env = {**job_env(), "SLURM_CONF": slurm_cluster.env["SLURM_CONF"]}
    job = run_job([slurm_cluster.bin["sbatch"], "--wait", "-n", str(RANKS), "-o", str(out),
                   "-e", str(err), str(script)],
                  JobOptions(env=env, timeout=TIMEOUT, name="sbatch --wait job.sh"))
    written = [p.read_text() if p.exists() else f"(sbatch wrote no {p})" for p in (out, err)]
    # sbatch's exit status with what the job's srun printed, as one RankJob
    check_hello(RankJob(job.command, JobOptions(ranks=RANKS, prefix=SRUN_PREFIX, name=job.name),
                        job.returncode, *written, job.seconds))


def test_killed_rank_is_named(slurm_cluster):
    """-K0: srun lets the others run on when rank 2 dies; each of them must name it."""
    check_killed(srun(slurm_cluster, "-K0", "-n", RANKS, PYTHON, KILL_JOB))


def test_no_wireup_service_says_what_to_set(slurm_cluster):
    job = srun(slurm_cluster, "--mpi=none", "-n", 2, PYTHON, HELLO)
    assert job.returncode != 0, job.describe()
    assert "THREELC_COORDINATOR" in job.stderr and "--mpi=pmix" in job.stderr, job.describe()
