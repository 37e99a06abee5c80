"""The DDP communication hook's suite: every rank runs the same pytest session under torchrun,
as DDP users run their jobs. From the repository root:

    PYTHONPATH=frameworks/python timeout 600 torchrun --standalone --nproc_per_node 2 \\
        -m pytest -q -p no:cacheprovider tests/frameworks/ddp

(3 ranks as well; THREELC_LIBRARY=/path/to/libthreelc.so picks another library.) That is
torch 2's torchrun (build/venv-torch2/bin/torchrun, as ctest's ddp_tests_np2_torch2 runs it);
with Debian's torch 1.13, tools/torchrun. Run without torchrun it is a one-rank job of its own
(a local gloo group).

The session initializes torch.distributed (gloo) and then the threelc engine, which takes its
identity from torchrun's variables and its job secret from torch's store. Before each test
every ``ddp.`` error-feedback residual is dropped, so each test starts as a fresh job would.
After each test the ranks compare, over gloo, which test they ran and whether it failed
(tests/support/lockstep.py): a test that failed on some ranks fails on all, and ranks that
drifted apart stop the job.
"""

from __future__ import annotations

import datetime
import os
import sys

import pytest
import torch
import torch.distributed as dist

os.environ.setdefault("THREELC_STALL_TIMEOUT", "10")

import threelc.engine as engine  # noqa: E402 (after the environment is set)
import threelc.torch as hvd  # noqa: E402

pytest_plugins = ["support.lockstep"]

GROUP_TIMEOUT = datetime.timedelta(seconds=120)


_exit_status = 0


def pytest_sessionfinish(session, exitstatus):
    global _exit_status
    _exit_status = int(exitstatus)


def pytest_unconfigure(config):
    """Leaves without the interpreter's teardown, where torch 1.13 can deadlock (freeing a DDP
    reducer joins gloo's worker thread while holding the GIL, and that thread may need it)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(_exit_status)


@pytest.fixture(scope="session", autouse=True)
def job():
    """torch.distributed (gloo) first, then the engine; both end with the session."""
    torch.set_num_threads(1)  # the ranks share the machine's cores
    if "RANK" not in os.environ:  # a one-rank job without torchrun
        os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", LOCAL_WORLD_SIZE="1",
                          MASTER_ADDR="127.0.0.1", MASTER_PORT=str(29400 + os.getpid() % 500))
    dist.init_process_group("gloo", timeout=GROUP_TIMEOUT)
    hvd.init()
    yield
    hvd.shutdown()
    dist.destroy_process_group()


@pytest.fixture(autouse=True)
def fresh_feedback():
    """Drops every ddp. residual: an empty blob (saved under a prefix nothing has) loaded under
    "ddp." replaces them all with nothing."""
    if hvd.is_initialized():
        engine.feedback_load(engine.feedback_save("(none)"), "ddp.")
    yield


class GlooRanks:
    """The lockstep's meeting (tests/support/lockstep.py): all_gather_object over gloo."""

    lost = ()  # its errors propagate

    def active(self) -> bool:
        return True

    def rank(self) -> int:
        return dist.get_rank()

    def gather(self, nodeid, mine):
        everyone = [None] * dist.get_world_size()
        dist.all_gather_object(everyone, mine)
        return everyone


@pytest.fixture(scope="session")
def lockstep_ranks(job):
    return GlooRanks()
