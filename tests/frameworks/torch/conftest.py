"""The threelc.torch suite: every rank runs the same pytest session under the launcher, as
Horovod's own torch tests run under horovodrun. From the repository root:

    PYTHONPATH=frameworks/python timeout 600 \\
        tools/threelcrun -np 2 /usr/bin/python3 -m pytest -q -p no:cacheprovider -x tests/torch
    PYTHONPATH=frameworks/python timeout 600 \\
        tools/threelcrun -np 3 /usr/bin/python3 -m pytest -q -p no:cacheprovider -x tests/torch

(THREELC_LIBRARY=/path/to/libthreelc.so picks another library than build/lib/libthreelc.so.)
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
  allgather named after the test (with a timeout): a test that failed on some ranks only is
  failed on every rank, and ranks that no longer run the same test (one stuck in a
  collective the others skipped) stop the job with a message instead of hanging.
"""

from __future__ import annotations

import os
import sys
import zlib

import pytest
import torch

os.environ.setdefault("THREELC_STALL_TIMEOUT", "2")

import threelc.torch as hvd  # noqa: E402 (after the environment is set)

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


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    setattr(item, "_report_" + report.when, report)


@pytest.fixture(scope="session", autouse=True)
def engine():
    """One engine for the session; shut down at its end."""
    torch.set_num_threads(1)  # the ranks share the machine's cores
    hvd.init()
    yield
    hvd.shutdown()


@pytest.fixture(autouse=True)
def _lockstep(request):
    """After each test: every rank says which test it ran and whether it failed."""
    yield
    if not hvd.is_initialized():
        return
    nodeid = request.node.nodeid
    report = getattr(request.node, "_report_call", None)
    failed = report is None or report.failed
    mine = torch.tensor([zlib.crc32(nodeid.encode()), int(failed)], dtype=torch.int64)
    try:
        handle = hvd.allgather_async(mine.reshape(1, 2), name=f"lockstep/{nodeid}")
        everyone = hvd.synchronize(handle, timeout=LOCKSTEP_TIMEOUT_S)
    except hvd.ThreelcError as e:
        _stop_job(request, 70, f"LOCKSTEP LOST after {nodeid}: {e}\nThe ranks no longer run "
                               f"the same test (a rank is stuck in a collective the others "
                               f"skipped, or failed differently); stopping the job.")
    ids = everyone[:, 0].tolist()
    if any(i != ids[0] for i in ids):
        _stop_job(request, 71, f"LOCKSTEP LOST after {nodeid}: the ranks ran different tests "
                               f"(crc32 {ids}); stopping the job.")
    failing = [r for r, f in enumerate(everyone[:, 1].tolist()) if f]
    if failing and not failed:
        pytest.fail(f"{nodeid} failed on rank(s) {failing} (see their reports) but passed on "
                    f"rank {hvd.rank()}", pytrace=False)


def _stop_job(request, code, message):
    """Prints past pytest's capture and exits at once (threelcrun then stops the others)."""
    capture = request.config.pluginmanager.getplugin("capturemanager")
    if capture is not None:
        capture.suspend_global_capture(in_=True)
    sys.stderr.write(f"\n[rank {hvd.rank()}] {message}\n")
    sys.stderr.flush()
    os._exit(code)


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
