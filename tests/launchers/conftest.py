"""The launcher suites' fixture: a real Slurm cluster (slurm_cluster.py)."""

from slurm_cluster import slurm_cluster  # noqa: F401 (a fixture)
