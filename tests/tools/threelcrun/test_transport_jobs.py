"""threelcrun and the TCP transport together: real ranks (tests/transport/transport_probe)
started by the launcher, talking over authenticated sockets on loopback."""

import os

import pytest

from support.rank_jobs import JobOptions, run_job, threelcrun

PROBE = os.environ.get("THREELC_TRANSPORT_PROBE", "")

pytestmark = pytest.mark.skipif(
    not os.path.isfile(PROBE), reason="THREELC_TRANSPORT_PROBE (the built transport_probe) not set"
)


def launch(np, command, *launcher_args, timeout=60, env=None):
    """(the ended job, its seconds)."""
    job = run_job(threelcrun(np, command, launcher_args),
                  JobOptions(env=env, timeout=timeout, scale_timeout=False))
    return job, job.seconds


@pytest.mark.parametrize("np", [1, 2, 3, 4])
def test_ranks_exchange_with_every_peer(np):
    result, _ = launch(np, [PROBE])
    assert result.returncode == 0, result.stdout + result.stderr


def test_rank_that_never_starts_is_named():
    # Rank 2 sleeps instead of joining; the others must fail after the start timeout, naming it.
    gate = f'if [ "$THREELC_RANK" = 2 ]; then exec sleep 60; else exec {PROBE}; fi'
    result, seconds = launch(3, ["sh", "-c", gate], "--start-timeout", "3", "--grace", "1")
    assert result.returncode != 0
    assert "rank 2 of 3 never connected" in result.stderr, result.stderr
    assert seconds < 20, seconds


def test_rank_killed_mid_transfer_fails_the_job_within_10s():
    # Rank 1 streams to rank 0 and SIGKILLs itself mid - stream.
    env = dict(os.environ, THREELC_PROBE_MODE="kill")
    result, seconds = launch(2, [PROBE], "--grace", "2", env=env)
    assert result.returncode != 0
    assert "rank 1" in result.stderr, result.stderr
    assert seconds < 10, seconds


def test_wrong_secret_on_one_rank_is_refused():
    # Rank 1 overrides the launcher's secret: the job fails naming rank 1, and nothing hangs.
    gate = f'if [ "$THREELC_RANK" = 1 ]; then THREELC_SECRET=wrong exec {PROBE}; else exec {PROBE}; fi'
    result, seconds = launch(3, ["sh", "-c", gate], "--start-timeout", "3", "--grace", "1")
    assert result.returncode != 0
    assert "rank 1" in result.stderr, result.stderr
    assert "THREELC_SECRET" in result.stderr or "authentication" in result.stderr, result.stderr
    assert seconds < 20, seconds


def test_data_listener_on_a_named_interface():
    # THREELC_IFACE names an interface (resolved with getifaddrs): "lo" is 127.0.0.1.
    result, _ = launch(3, [PROBE], "-x", "THREELC_IFACE=lo")
    assert result.returncode == 0, result.stdout + result.stderr


def test_unknown_interface_is_named():
    result, _ = launch(2, [PROBE], "-x", "THREELC_IFACE=nosuchif0", "--grace", "1")
    assert result.returncode != 0
    assert "nosuchif0" in result.stderr, result.stderr
