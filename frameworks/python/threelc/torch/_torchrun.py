"""Starting the engine inside a torch.distributed job: under torchrun, or in any process group
that torch.distributed knows (PyTorch Lightning's launcher, torch.multiprocessing.spawn).

Under torchrun the engine takes its identity from torchrun's variables itself (RANK,
WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE; docs/CONFIGURATION.md). Where no launcher's rank
variable is set but torch.distributed is initialized (Lightning's own launcher sets WORLD_SIZE,
LOCAL_RANK, MASTER_ADDR and MASTER_PORT, not RANK), the identity comes from the process group:
THREELC_RANK and THREELC_SIZE from ``get_rank()`` and ``get_world_size()``, THREELC_LOCAL_RANK
and THREELC_LOCAL_SIZE from the host names the ranks publish in torch's store.

Two things neither gives the engine travel through torch.distributed's store, the way NCCL's
unique id does, so ``init_process_group`` must come first:

- the job secret that authenticates every connection (threelcrun makes one per job): rank 0
  draws one, every rank reads it;
- where rank 0's engine listens (THREELC_COORDINATOR): rank 0 takes a free port on its host and
  publishes ``MASTER_ADDR:port``, afresh for every init. (The engine's own fallback,
  MASTER_PORT + 1, is often taken: ports next to a freshly bound one go to other sockets.)

The same holds under mpirun or srun once torch.distributed is initialized (PyTorch Lightning
on Slurm): the identity is then the launcher's, the secret and the coordinator the store's. A
job that sets THREELC_SECRET and THREELC_COORDINATOR itself (the same on every rank) needs no
store.
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
_HOST_KEY = "threelc/host"
_TORCHRUN_VARIABLES = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
# The rank variables of the launchers the engine reads itself (transport/src/settings_rows.h).
_LAUNCHER_RANKS = ("THREELC_RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "RANK")

_identity_from_group = False  # the THREELC_* identity variables were set here


def under_torchrun() -> bool:
    """True when torchrun's variables, and no other launcher's, describe this process."""
    if "THREELC_RANK" in os.environ or "OMPI_COMM_WORLD_RANK" in os.environ or \
            "SLURM_PROCID" in os.environ:
        return False
    return all(v in os.environ for v in _TORCHRUN_VARIABLES)


def _initialized_dist():
    """torch.distributed when its default group is initialized, else None."""
    import torch.distributed as dist  # noqa: PLC0415 (only inside torch.distributed jobs)

    return dist if dist.is_available() and dist.is_initialized() else None


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


def _present(store, key: str) -> bool:
    if hasattr(store, "check"):
        return store.check([key])
    try:  # torch 1.13's stores have no check()
        store.wait([key], datetime.timedelta(milliseconds=1))
        return True
    except RuntimeError:
        return False


def _wait_for(store, keys, rank: int) -> None:
    """Waits for `keys` (each set by the rank its last part names) up to
    THREELC_START_TIMEOUT; the error names the keys still missing."""
    try:
        store.wait(keys, datetime.timedelta(seconds=_start_timeout()))
    except RuntimeError as error:
        missing = [key for key in keys if not _present(store, key)]
        shown = ", ".join(missing[:8]) + (f" and {len(missing) - 8} more" if len(missing) > 8
                                          else "")
        raise _engine.ThreelcError(
            f"rank {rank}: {shown or ', '.join(keys)} did not appear in torch.distributed's "
            f"store within THREELC_START_TIMEOUT ({_start_timeout()} s): the ranks that set "
            f"them have not started threelc", _engine.EPEER) from error


def _publish(store, key: str, rank: int, value_of_rank0) -> str:
    """Rank 0 sets `key` to value_of_rank0(); every rank returns it (bounded wait)."""
    if rank == 0:
        store.set(key, value_of_rank0())
    _wait_for(store, [key], rank)
    return store.get(key).decode()


def _take_identity_from_group(dist, store) -> None:
    """THREELC_RANK/SIZE from the process group; THREELC_LOCAL_RANK/SIZE from the host names
    every rank publishes (THREELC_HOSTNAME when set, as the engine groups hosts)."""
    global _identity_from_group
    rank, size = dist.get_rank(), dist.get_world_size()
    host = os.environ.get("THREELC_HOSTNAME") or socket.gethostname()
    store.set(f"{_HOST_KEY}/{rank}", host)
    keys = [f"{_HOST_KEY}/{r}" for r in range(size)]
    _wait_for(store, keys, rank)
    hosts = [store.get(key).decode() for key in keys]
    os.environ.update(THREELC_RANK=str(rank), THREELC_SIZE=str(size),
                      THREELC_LOCAL_RANK=str(hosts[:rank].count(host)),
                      THREELC_LOCAL_SIZE=str(hosts.count(host)))
    _identity_from_group = True


def _store_of_initialized_group():
    dist = _initialized_dist()
    if dist is None:
        raise _engine.ThreelcError(
            "under torchrun threelc shares its job secret and rank 0's address through "
            "torch.distributed's store: call torch.distributed.init_process_group() before "
            "threelc.torch.init() (or before the DDP hook's first step), or set "
            "THREELC_SECRET and THREELC_COORDINATOR to the same values on every rank",
            _engine.EINVAL)
    return dist, dist.distributed_c10d._get_default_store()


def share_rendezvous() -> None:
    """Inside a torch.distributed job (and nothing set them): the identity (when no launcher's
    variables give it), THREELC_SECRET and, for this engine start, THREELC_COORDINATOR from
    torch.distributed's store. A no-op otherwise."""
    global _starts
    dist = _initialized_dist()
    if under_torchrun():
        size, rank = int(os.environ["WORLD_SIZE"]), int(os.environ["RANK"])
    elif dist is not None:
        size, rank = dist.get_world_size(), dist.get_rank()
    elif _identity_from_group:
        raise _engine.ThreelcError(
            "this process's threelc rank came from torch.distributed's process group, which "
            "is no longer initialized: call torch.distributed.init_process_group() again "
            "before threelc starts anew", _engine.EINVAL)
    else:
        return
    if size <= 1:
        return
    launcher_identity = under_torchrun() or any(v in os.environ for v in _LAUNCHER_RANKS)
    # Taken afresh for every start when it came from the group (which may have been made anew).
    needs_identity = _identity_from_group or not launcher_identity
    needs_secret = "THREELC_SECRET" not in os.environ
    # Ours when an earlier start published it; a coordinator the user set stays.
    needs_coordinator = _starts > 0 or "THREELC_COORDINATOR" not in os.environ
    if not (needs_identity or needs_secret or needs_coordinator):
        return
    dist, store = _store_of_initialized_group()
    if needs_identity:
        _take_identity_from_group(dist, store)
    if needs_secret:
        os.environ["THREELC_SECRET"] = _publish(store, _SECRET_KEY, rank,
                                                lambda: secrets.token_hex(32))
    if needs_coordinator:
        address = os.environ.get("MASTER_ADDR")
        if not address:
            raise _engine.ThreelcError(
                "threelc cannot tell where rank 0's engine is to listen: set MASTER_ADDR (the "
                "host of rank 0) or THREELC_COORDINATOR (host:port, the same on every rank)",
                _engine.EINVAL)
        os.environ["THREELC_COORDINATOR"] = _publish(
            store, f"{_COORDINATOR_KEY}/{_starts}", rank, lambda: f"{address}:{_free_port()}")
        _starts += 1


def init_engine() -> None:
    """Joins the job (a no-op while the engine runs), sharing what it needs inside a
    torch.distributed job."""
    if _engine.is_initialized():
        return
    share_rendezvous()
    _engine.init()
