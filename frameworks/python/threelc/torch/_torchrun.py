"""Starting the engine under torchrun.

The engine takes its identity from torchrun's variables itself (RANK, WORLD_SIZE, LOCAL_RANK,
LOCAL_WORLD_SIZE; docs/CONFIGURATION.md). Two things torchrun does not give it travel through
torch.distributed's store, the way NCCL's unique id does, so ``init_process_group`` must come
first:

- the job secret that authenticates every connection (threelcrun makes one per job): rank 0
  draws one, every rank reads it;
- where rank 0's engine listens (THREELC_COORDINATOR): rank 0 takes a free port on its host and
  publishes ``MASTER_ADDR:port``, afresh for every init. (The engine's own fallback,
  MASTER_PORT + 1, is often taken: ports next to a freshly bound one go to other sockets.)

A job that sets THREELC_SECRET and THREELC_COORDINATOR itself (the same on every rank) needs
no store.
"""

from __future__ import annotations

import datetime
import os
import secrets
import socket

from .. import engine as _engine
from .. import settings as _settings

_SECRET_KEY = "threelc/job_secret"
_COORDINATOR_KEY = "threelc/coordinator"
_TORCHRUN_VARIABLES = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


def under_torchrun() -> bool:
    """True when torchrun's variables, and no other launcher's, describe this process."""
    if "THREELC_RANK" in os.environ or "OMPI_COMM_WORLD_RANK" in os.environ or \
            "SLURM_PROCID" in os.environ:
        return False
    return all(v in os.environ for v in _TORCHRUN_VARIABLES)


def _start_timeout() -> float:
    text = _settings.value("THREELC_START_TIMEOUT")
    try:
        return float(text)
    except ValueError:
        # The engine refuses the malformed value itself, naming it; wait the declared default.
        return float(next(row.default for row in _settings.library_settings()
                          if row.name == "THREELC_START_TIMEOUT"))


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("", 0))
        return probe.getsockname()[1]


_starts = 0  # engine starts that published a coordinator: each start gets its own key


def _publish(store, key: str, value_of_rank0) -> str:
    """Rank 0 sets `key` to value_of_rank0(); every rank returns it (bounded wait)."""
    if int(os.environ["RANK"]) == 0:
        store.set(key, value_of_rank0())
    try:
        store.wait([key], datetime.timedelta(seconds=_start_timeout()))
    except RuntimeError as error:
        raise _engine.ThreelcError(
            f"rank {os.environ['RANK']}: rank 0 did not publish {key} in torch.distributed's "
            f"store within THREELC_START_TIMEOUT ({_start_timeout()} s): {error}",
            _engine.EPEER) from error
    return store.get(key).decode()


def share_rendezvous() -> None:
    """Under torchrun (and nothing set them): THREELC_SECRET and, for this engine start,
    THREELC_COORDINATOR from torch.distributed's store. A no-op otherwise."""
    global _starts
    if not under_torchrun() or int(os.environ["WORLD_SIZE"]) <= 1:
        return
    needs_secret = "THREELC_SECRET" not in os.environ
    # Ours when an earlier start published it; a coordinator the user set stays.
    needs_coordinator = _starts > 0 or "THREELC_COORDINATOR" not in os.environ
    if not (needs_secret or needs_coordinator):
        return
    import torch.distributed as dist  # noqa: PLC0415 (only under torchrun)

    if not (dist.is_available() and dist.is_initialized()):
        raise _engine.ThreelcError(
            "under torchrun threelc shares its job secret and rank 0's address through "
            "torch.distributed's store: call torch.distributed.init_process_group() before "
            "threelc.torch.init() (or before creating DDPHookState), or set THREELC_SECRET and "
            "THREELC_COORDINATOR to the same values on every rank", _engine.EINVAL)
    store = dist.distributed_c10d._get_default_store()
    if needs_secret:
        os.environ["THREELC_SECRET"] = _publish(store, _SECRET_KEY,
                                                lambda: secrets.token_hex(32))
    if needs_coordinator:
        address = os.environ["MASTER_ADDR"]
        os.environ["THREELC_COORDINATOR"] = _publish(
            store, f"{_COORDINATOR_KEY}/{_starts}", lambda: f"{address}:{_free_port()}")
        _starts += 1


def init_engine() -> None:
    """Joins the job (a no-op while the engine runs), sharing what it needs under torchrun."""
    if _engine.is_initialized():
        return
    share_rendezvous()
    _engine.init()
