"""The threelc.torch suite: every rank runs the same pytest session under the launcher, as
Horovod's own torch tests run under horovodrun. From the repository root:

    PYTHONPATH=frameworks/python timeout 600 tools/threelcrun -np 2 \\
        /usr/bin/python3 -m pytest -q -p no:cacheprovider -x tests/frameworks/torch
    PYTHONPATH=frameworks/python timeout 600 tools/threelcrun -np 3 \\
        /usr/bin/python3 -m pytest -q -p no:cacheprovider -x tests/frameworks/torch

(build/venv-torch2/bin/python instead of /usr/bin/python3 runs it on torch 2.13, as ctest's
torch_tests_np2_torch2 does; THREELC_LIBRARY=/path/to/libthreelc.so picks another library than
build/lib/libthreelc.so.)
Run without the launcher it is a one-rank job: everything runs except the tests that need
two ranks (cross-rank mismatches), which are skipped.

How the session is arranged:

- the engine is initialized once (session fixture) and shut down at the end. Tests marked
  ``@pytest.mark.late(k)`` run after every unmarked test, in increasing k: late(1) the
  name-mismatch test (it needs the engine's THREELC_STALL_TIMEOUT), late(2) tests of
  faults once found (bool/uint8 disagreement, a 3LC name reused with another size, which
  may restart the engine if it regresses), late(3) the test of shutdown and init again,
  last. So with -x a failure among them stops only what follows;
- THREELC_STALL_TIMEOUT is set to 2 s before init (unless already set), so that a tensor
  submitted by some ranks but not others fails instead of hanging (the name-mismatch test);
- every rank makes the same sequence of collective calls. Tests do their collectives first
  and assert afterwards where they can, and after every test the ranks meet in a "lockstep"
  (tests/support/lockstep.py) through an allgather named after the test (with a timeout): a
  test that failed on some ranks only is failed on every rank, and ranks that no longer run
  the same test (one stuck in a collective the others skipped) stop the job with a message
  instead of hanging.
"""

from __future__ import annotations

import os
import zlib

import pytest
import torch

os.environ.setdefault("THREELC_STALL_TIMEOUT", "2")

import threelc.torch as hvd  # noqa: E402 (after the environment is set)

pytest_plugins = ["support.lockstep"]

LOCKSTEP_TIMEOUT_S = 120.0


def pytest_configure(config):
    config.addinivalue_line("markers", "late(order): run this test after all unmarked ones "
                                       "(in increasing order)")


def pytest_collection_modifyitems(session, config, items):
    """Tests marked late go last, in the order of their mark (stable otherwise): the same on
    every rank."""
    def key(item):
        mark = item.get_closest_marker("late")
        return 0 if mark is None else int(mark.args[0]) if mark.args else 1

    items[:] = sorted(items, key=key)


@pytest.fixture(scope="session", autouse=True)
def engine():
    """One engine for the session; shut down at its end."""
    torch.set_num_threads(1)  # the ranks share the machine's cores
    hvd.init()
    yield
    hvd.shutdown()


class EngineRanks:
    """The lockstep's meeting (tests/support/lockstep.py): an allgather through the engine."""

    lost = (hvd.ThreelcError,)  # its error or timeout

    def active(self) -> bool:
        return hvd.is_initialized()

    def rank(self) -> int:
        return hvd.rank()

    def gather(self, nodeid, mine):
        crc, failed = mine
        tensor = torch.tensor([crc, int(failed)], dtype=torch.int64)
        handle = hvd.allgather_async(tensor.reshape(1, 2), name=f"lockstep/{nodeid}")
        everyone = hvd.synchronize(handle, timeout=LOCKSTEP_TIMEOUT_S)
        return [(crc, bool(failed)) for crc, failed in everyone.tolist()]


@pytest.fixture(scope="session")
def lockstep_ranks(engine):
    return EngineRanks()


@pytest.fixture
def names(request):
    """names('x') -> a collective name unique to this test (and its parameters)."""
    prefix = request.node.nodeid.split("::", 1)[-1]
    return lambda suffix="": f"{prefix}/{suffix}"


@pytest.fixture
def salt(request):
    """A seed unique to this test, the same on every rank."""
    return zlib.crc32(request.node.nodeid.encode()) & 0xFFFFFF


@pytest.fixture
def multi_rank():
    if hvd.size() < 2:
        pytest.skip("needs at least 2 ranks (run under tools/threelcrun -np 2)")
