"""Starting the engine under torchrun.

The engine takes its identity from torchrun's variables itself (RANK, WORLD_SIZE, LOCAL_RANK,
LOCAL_WORLD_SIZE; the coordinator at MASTER_ADDR:MASTER_PORT+1; docs/CONFIGURATION.md). What
torchrun cannot give it is the job secret that authenticates every connection (threelcrun
makes one per job). Under torchrun the secret travels the way NCCL's unique id does: rank 0
draws one and puts it in torch.distributed's store, every other rank reads it from there. So
``init_process_group`` must come first; a job that sets THREELC_SECRET itself (the same on every
rank) needs no store.
"""

from __future__ import annotations

import datetime
import os
import secrets

from .. import engine as _engine

_STORE_KEY = "threelc/job_secret"
_TORCHRUN_VARIABLES = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


def under_torchrun() -> bool:
    """True when torchrun's variables, and no other launcher's, describe this process."""
    if "THREELC_RANK" in os.environ or "OMPI_COMM_WORLD_RANK" in os.environ or \
            "SLURM_PROCID" in os.environ:
        return False
    return all(v in os.environ for v in _TORCHRUN_VARIABLES)


def _start_timeout() -> float:
    try:
        return float(os.environ.get("THREELC_START_TIMEOUT", "60"))
    except ValueError:
        return 60.0  # the engine refuses the malformed value itself, naming it


def share_secret() -> None:
    """Sets THREELC_SECRET from torch.distributed's store when torchrun started this process
    and nothing set it; a no-op otherwise."""
    if "THREELC_SECRET" in os.environ or not under_torchrun():
        return
    if int(os.environ["WORLD_SIZE"]) <= 1:
        return
    import torch.distributed as dist  # noqa: PLC0415 (only under torchrun)

    if not (dist.is_available() and dist.is_initialized()):
        raise _engine.ThreelcError(
            "under torchrun threelc shares its job secret through torch.distributed's store: "
            "call torch.distributed.init_process_group() before threelc.torch.init() (or "
            "before creating DDPHookState), or set THREELC_SECRET to the same value on every "
            "rank", _engine.EINVAL)
    store = dist.distributed_c10d._get_default_store()
    if int(os.environ["RANK"]) == 0:
        store.set(_STORE_KEY, secrets.token_hex(32))
    try:
        store.wait([_STORE_KEY], datetime.timedelta(seconds=_start_timeout()))
    except RuntimeError as error:
        raise _engine.ThreelcError(
            f"rank {os.environ['RANK']}: rank 0 did not publish threelc's job secret in "
            f"torch.distributed's store within THREELC_START_TIMEOUT ({_start_timeout()} s): "
            f"{error}", _engine.EPEER) from error
    os.environ["THREELC_SECRET"] = store.get(_STORE_KEY).decode()


def init_engine() -> None:
    """Joins the job (a no-op while the engine runs), sharing the secret under torchrun."""
    if _engine.is_initialized():
        return
    share_secret()
    _engine.init()
