"""pytest plugin of the suites where every rank runs the same pytest session (tests/frameworks/
torch under threelcrun, tests/frameworks/ddp under torchrun): after each test the ranks meet
and agree.

Each rank says which test it ran (crc32 of its node id) and whether it failed. A test that
failed on some ranks only is failed on every rank; ranks that no longer run the same test (one
stuck in a collective the others skipped, or a failed meeting) stop the job at once with a
message instead of hanging: exit 70 when the meeting itself failed, 71 when the ranks ran
different tests.

A suite loads it with ``pytest_plugins = ["support.lockstep"]`` in its conftest.py and
provides a fixture ``lockstep_ranks``: an object with

    active() -> bool                  whether the ranks can meet now (False: skip the meeting)
    rank() -> int                     this rank, for the messages
    gather(nodeid, mine) -> list      every rank's `mine` (a (crc32, failed) pair), in rank
                                      order
    lost: tuple                       the exception types of gather() that mean the meeting
                                      failed (others propagate)
"""

from __future__ import annotations

import os
import sys
import zlib

import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Keeps each phase's report on the item (item._report_call: whether the test failed)."""
    outcome = yield
    report = outcome.get_result()
    setattr(item, "_report_" + report.when, report)


@pytest.fixture(autouse=True)
def _lockstep(request, lockstep_ranks):
    """After each test: every rank says which test it ran and whether it failed."""
    yield
    if not lockstep_ranks.active():
        return
    nodeid = request.node.nodeid
    report = getattr(request.node, "_report_call", None)
    failed = report is None or report.failed
    mine = (zlib.crc32(nodeid.encode()), bool(failed))
    try:
        everyone = lockstep_ranks.gather(nodeid, mine)
    except lockstep_ranks.lost as e:
        stop_job(request, lockstep_ranks.rank(), 70,
                 f"LOCKSTEP LOST after {nodeid}: {e}\nThe ranks no longer run the same test (a "
                 f"rank is stuck in a collective the others skipped, or failed differently); "
                 f"stopping the job.")
    ids = [crc for crc, _ in everyone]
    if any(i != ids[0] for i in ids):
        stop_job(request, lockstep_ranks.rank(), 71,
                 f"LOCKSTEP LOST after {nodeid}: the ranks ran different tests (crc32 {ids}); "
                 f"stopping the job.")
    failing = [r for r, (_, f) in enumerate(everyone) if f]
    if failing and not failed:
        pytest.fail(f"{nodeid} failed on rank(s) {failing} (see their reports) but passed on "
                    f"rank {lockstep_ranks.rank()}", pytrace=False)


def stop_job(request, rank: int, code: int, message: str):
    """Prints past pytest's capture and exits at once (the launcher then stops the others)."""
    capture = request.config.pluginmanager.getplugin("capturemanager")
    if capture is not None:
        capture.suspend_global_capture(in_=True)
    sys.stderr.write(f"\n[rank {rank}] {message}\n")
    sys.stderr.flush()
    os._exit(code)
