"""The engine through its Python binding, with real rank processes started by threelcrun.

Each test runs ``tools/threelcrun -np N /usr/bin/python3 worker.py CASE`` on this machine;
the worker checks its own results against numpy references (see worker.py) and exits
non-zero with ``FAIL rank R CASE: ...`` on stderr otherwise. Here we check that every rank
exited 0 and printed ``DONE``, and that the ``HASH`` lines (results that must be bitwise
identical on every rank) agree across ranks.

Run: PYTHONPATH=frameworks/python /usr/bin/python3 -m pytest -q tests/engine/jobs
(THREELC_LIBRARY selects the library; default build/lib/libthreelc.so).
"""

from __future__ import annotations

import ctypes
import json
import os
import re
from pathlib import Path

import pytest

from support.paths import PYTHON, REPO, library_path
from support.rank_jobs import JobOptions, RankJob, run_job as run_ranks, threelcrun

WORKER = Path(__file__).resolve().parent / "worker.py"
# engine_job_tests_ucx (THREELC_TRANSPORT=ucx) runs the cases that move data between ranks; the
# others (settings, negotiation over the TCP control channels, observability, one-rank jobs)
# run over tcp only (CI time).
OVER_UCX = os.environ.get("THREELC_TRANSPORT") == "ucx"
tcp_only = pytest.mark.skipif(OVER_UCX, reason="no data channel involved: the tcp variant runs it")


def test_library_has_the_engine():
    """Everything below needs the engine in libthreelc.so: say so plainly when it is not."""
    path = library_path()
    assert path.is_file(), f"{path} does not exist (build it: tools/build.sh)"
    lib = ctypes.CDLL(str(path))
    assert hasattr(lib, "threelc_init"), f"{path} does not export threelc_init"


def clean_env(extra=None) -> dict:
    """This environment less its THREELC_* settings, but for THREELC_LIBRARY and
    THREELC_TRANSPORT (ctest's engine_job_tests_ucx runs every job over UCX), plus `extra`."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("THREELC_") or k in ("THREELC_LIBRARY", "THREELC_TRANSPORT")}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["THREELC_START_TIMEOUT"] = "30"
    env["THREELC_TIMEOUT"] = "60"
    env["THREELC_DEADLOCK_TIMEOUT"] = "60"  # as long as THREELC_TIMEOUT, which set it before
    env.update(extra or {})
    return env


def run_job(np_, case, *args, env=None, timeout=120, launcher_args=()) -> RankJob:
    """`threelcrun -np np_ worker.py case args` (every rank prints ``DONE case`` at its end);
    `timeout` is the job's hard limit (scaled in sanitizer builds: tests/support/rank_jobs.py),
    not the engine's own waits."""
    if OVER_UCX and np_ == 1:
        pytest.skip("a job of one rank has no data channel: the tcp variant runs it")
    command = threelcrun(np_, [PYTHON, WORKER, case, *args], ["--grace", "2", *launcher_args])
    return run_ranks(command, JobOptions(env=clean_env(env), cwd=REPO, timeout=timeout,
                                         name=f"threelcrun -np {np_} worker.py {case}",
                                         ranks=np_, done=f"DONE {case}"))


def assert_ok(job: RankJob, expect_hashes: bool = True) -> RankJob:
    """Exit 0, DONE on every rank, identical HASH lines on every rank."""
    assert job.returncode == 0, job.describe()
    for r in range(job.np):
        assert any(l.startswith(job.options.done) for l in job.lines[r]), (
            f"rank {r} did not finish\n" + job.describe())
    hashes = job.hashes()
    if expect_hashes:
        assert hashes[0], f"no HASH lines from rank 0\n{job.describe()}"
    for r in range(1, job.np):
        assert hashes[r] == hashes[0], (
            f"rank {r}'s results differ from rank 0's:\n"
            + "\n".join(f"  {a}  |  {b}" for a, b in zip(hashes[0], hashes[r]) if a != b)
            + f"\n({len(hashes[0])} vs {len(hashes[r])} lines)")
    for l in job.prefixed("STAT ")[0]:
        print(l)
    return job


# ------------------------------------------------------------------------------- tests

@pytest.mark.parametrize("n", [1, 2, 3, 4, 5])
def test_sizes(n):
    job = assert_ok(run_job(n, "sizes"))
    # 13 shapes x (raw, 3lc, default)
    assert len(job.hashes()[0]) == 13 * 3, job.describe()


@pytest.mark.parametrize("n", [3, 5])
def test_sizes_ring(n):
    assert_ok(run_job(n, "sizes", env={"THREELC_ALLREDUCE": "ring"}))


@pytest.mark.parametrize("n", [1, 2, 3, 5])
def test_dtypes_and_ops(n):
    job = assert_ok(run_job(n, "dtypes_ops"))
    assert len(job.hashes()[0]) == 9 * 6, job.describe()  # 9 dtypes (worker_data.DTYPE_NAMES)


def test_50m_elements():
    job = assert_ok(run_job(2, "big", timeout=180), expect_hashes=True)
    assert len(job.hashes()[0]) == 1


@pytest.mark.parametrize("algorithm", ["push_pull", "ring"])
@pytest.mark.parametrize("n", [2, 3, 5])
def test_compressed_error_feedback(n, algorithm):
    job = assert_ok(run_job(n, "error_feedback", env={"THREELC_ALLREDUCE": algorithm}))
    assert [l.split()[1] for l in job.hashes()[0]] == ["ef/10", "ef/100"], job.describe()


@pytest.mark.parametrize("tile", ["0", "1280", None])  # None: the default
@pytest.mark.parametrize("n", [2, 3])
def test_scale_per_tile(n, tile):
    env = {} if tile is None else {"THREELC_SCALE_TILE": tile}
    job = assert_ok(run_job(n, "scale_tile", env=env))
    assert job.hashes()[0], job.describe()


@pytest.mark.parametrize("n,per_host,algorithm", [(4, 4, "push_pull"), (4, 2, "push_pull"),
                                                   (4, 2, "ring"), (6, 3, "push_pull"),
                                                   (3, 2, "push_pull")])
def test_hierarchical_allreduce(n, per_host, algorithm):
    """THREELC_HIERARCHICAL=1 with n ranks, per_host of them per (THREELC_HOSTNAME) host."""
    job = assert_ok(run_job(n, "hierarchical", per_host, env={"THREELC_ALLREDUCE": algorithm,
                                                                "THREELC_LOG_LEVEL": "info"}))
    warned = [l for l in job.stderr.splitlines() if "THREELC_HIERARCHICAL=1 ignored" in l]
    if n % per_host:
        assert any(l.startswith("[0]") and "different numbers of ranks" in l for l in warned), \
            job.describe()
    else:
        assert not warned, job.describe()
        groups = [l for l in job.stderr.splitlines() if "hierarchical allreduce:" in l]
        assert len(groups) == n, job.describe()
        # rank 1 shares a host with rank 0; its peers on other hosts are 1 + k * per_host
        peers = ",".join(str(1 + k * per_host) for k in range(n // per_host))
        assert any(l.startswith("[1]") and f"across hosts with ranks {peers}" in l
                   for l in groups), job.describe()


@pytest.mark.parametrize("n", [3, 4])
def test_200_async_tensors_in_random_order(n):
    job = assert_ok(run_job(n, "async"))
    assert len(job.hashes()[0]) == 1


@tcp_only
@pytest.mark.parametrize("n", [2, 3])
def test_consistency_errors(n):
    assert_ok(run_job(n, "mismatch"), expect_hashes=False)


@pytest.mark.parametrize("n", [1, 2, 3, 5])
def test_collectives(n):
    assert_ok(run_job(n, "collectives"))


@pytest.mark.parametrize("n", [1, 2, 3])
def test_join(n):
    assert_ok(run_job(n, "join"), expect_hashes=False)


@pytest.mark.parametrize("n,orphan_rank", [(1, 0), (2, 1), (3, 0)])
def test_shutdown_with_pending_operation(n, orphan_rank):
    job = assert_ok(run_job(n, "shutdown", orphan_rank, timeout=60))
    assert job.seconds < 30, job.describe()


def test_flush_negotiates_at_once():
    # With 1 s cycles an allreduce waits up to a second for the next cycle; after threelc_flush
    # it runs at once (a few ms; the bound is 0.3 s, which three unflushed allreduces on both
    # ranks would all meet about once in 40 runs).
    job = assert_ok(run_job(2, "flush", env={"THREELC_CYCLE_TIME_MS": "1000"}),
                    expect_hashes=False)
    for r in range(2):
        times = {}
        for line in job.prefixed("FLUSH ")[r]:
            _, flushed, seconds = line.split()
            times.setdefault(flushed == "1", []).append(float(seconds))
        assert len(times.get(True, [])) == 3 and len(times.get(False, [])) == 1, job.describe()
        assert max(times[True]) < 0.3, (times, job.describe())


@tcp_only
def test_stall_warning_names_the_tensor_and_the_missing_rank():
    job = assert_ok(run_job(3, "stall", env={"THREELC_STALL_CHECK_TIME": "1"}),
                    expect_hashes=False)
    warnings = [l for l in job.stderr.splitlines() if l.startswith("[0]") and "WARNING" in l]
    assert any("late" in l and re.search(r"\b1\b", l) for l in warnings), job.describe()


@tcp_only
def test_stall_timeout_fails_a_name_mismatch_on_every_rank():
    job = assert_ok(run_job(2, "stall_timeout", env={"THREELC_STALL_TIMEOUT": "2"}))
    assert job.seconds < 60, job.describe()


@tcp_only
def test_a_deadlock_fails_within_the_timeout_naming_what_each_rank_waits_for():
    # The engine's own timeout; the transport's THREELC_TIMEOUT stays at run_job's 60 s.
    job = assert_ok(run_job(2, "deadlock", env={"THREELC_DEADLOCK_TIMEOUT": "3"}))
    assert job.seconds < 60, job.describe()


@tcp_only
def test_runaway_error_feedback_is_logged_naming_the_tensor():
    job = assert_ok(run_job(2, "feedback_runaway", env={"THREELC_FEEDBACK_LIMIT": "100",
                                                        "THREELC_STATS": "1"}))
    errors = [l for l in job.stderr.splitlines() if "running away" in l]
    assert any(l.startswith("[0]") and "ERROR" in l and "'fb/w'" in l and "rank 0" in l
               and "sparsity 1.9" in l and "THREELC_FEEDBACK_LIMIT 100" in l
               and "THREELC_SPARSITY" in l for l in errors), job.describe()
    # once, not at every check; and never about the healthy tensor
    assert len([l for l in errors if l.startswith("[0]") and "'fb/w'" in l]) == 1, job.describe()
    assert not any("'fb/ok'" in l for l in errors), job.describe()
    assert re.search(r"^\[0\] .*error feedback: .* [1-9]\d* sampled steps with a runaway",
                     job.stderr, re.MULTILINE), job.describe()


@tcp_only
def test_non_finite_gradient_warns_and_reaches_every_rank():
    job = assert_ok(run_job(2, "feedback_nan"))
    warnings = [l for l in job.stderr.splitlines()
                if l.startswith("[0]") and "WARNING" in l and "NaN or Inf" in l]
    assert any("'nan/w'" in l and "rank 0" in l and "after 4 compressed steps" in l
               and "uncompressed" in l for l in warnings), job.describe()


@pytest.mark.parametrize("n", [2, 3])
def test_dead_peer_fails_pending_operations_naming_it(n):
    job = run_job(n, "dead_peer", timeout=90)
    assert job.returncode == 0, job.describe()
    for r in range(n - 1):
        assert any(l.startswith("DONE dead_peer") for l in job.lines[r]), job.describe()


BAD_VALUES = [
    "THREELC_FUSION_THRESHOLD=abc",
    "THREELC_SPARSITY=3",
    "THREELC_SPARSITY=0.5",
    "THREELC_CYCLE_TIME_MS=0",
    "THREELC_CHUNK_BYTES=1000",
    "THREELC_COMPRESSION=zip",
    "THREELC_MIN_COMPRESS_BYTES=-1",
    "THREELC_ALLREDUCE=tree",
    "THREELC_STATS=yes",
    "THREELC_LOG_LEVEL=loud",
    "THREELC_STALL_CHECK_TIME=soon",
    "THREELC_STALL_TIMEOUT=-5",
    "THREELC_FEEDBACK_LIMIT=lots",
    "THREELC_CACHE_CAPACITY=-3",
    "THREELC_TRANSPORT=pigeon",
    "THREELC_TIMEOUT=abc",
]


@tcp_only
def test_malformed_variables_are_named_one_rank():
    job = assert_ok(run_job(1, "bad_env", *BAD_VALUES), expect_hashes=False)
    assert len(job.prefixed("STAT bad_env")[0]) == len(BAD_VALUES), job.describe()


@tcp_only
def test_malformed_variable_is_named_on_every_rank():
    job = assert_ok(run_job(2, "bad_env", "THREELC_FUSION_THRESHOLD=abc", "THREELC_SPARSITY=3"),
                    expect_hashes=False)
    for r in range(2):
        assert len(job.prefixed("STAT bad_env")[r]) == 2, job.describe()


@tcp_only
def test_malformed_variable_from_the_launcher_fails_init():
    # set through threelcrun (-x), not by the worker: init fails on every rank, naming it
    job = run_job(2, "api", launcher_args=("-x", "THREELC_FUSION_THRESHOLD=abc"))
    assert job.returncode != 0, job.describe()
    assert re.search(r"^\[\d\] FAIL rank \d api: .*THREELC_FUSION_THRESHOLD", job.stderr,
                     re.MULTILINE), job.describe()


@tcp_only
def test_timeline(tmp_path):
    n = 2
    assert_ok(run_job(n, "timeline", tmp_path), expect_hashes=False)
    doc = json.loads((tmp_path / "timeline.0.json").read_text())
    assert doc, "rank 0's timeline is empty"


@tcp_only
def test_statistics_at_shutdown():
    job = assert_ok(run_job(2, "stats", env={"THREELC_STATS": "1"}), expect_hashes=False)
    for r in range(2):
        assert job.prefixed("STATS| ")[r], job.describe()


@tcp_only
@pytest.mark.parametrize("n", [1, 3])
def test_binding_api(n):
    assert_ok(run_job(n, "api"), expect_hashes=False)


@pytest.mark.parametrize("n,algorithm", [(2, "push_pull"), (3, "push_pull"), (3, "ring")])
def test_feedback_checkpoint_resumes_bit_for_bit(n, algorithm):
    """Save the error feedback after 3 compressed steps, restart the engine, load it: the next
    4 steps are bitwise those of the uninterrupted run (and differ without the load); another
    rank's blob is EINVAL, a damaged one EMALFORMED, neither changes anything."""
    job = assert_ok(run_job(n, "feedback_checkpoint", env={"THREELC_ALLREDUCE": algorithm}))
    assert len(job.hashes()[0]) == 4 * 3, job.describe()


@pytest.mark.parametrize("n", [3, 4])
def test_process_sets(n):
    """Two disjoint process sets (even and odd ranks) run allreduce (raw and 3LC), allgather,
    broadcast, alltoall, reducescatter and barrier at once under the same names, checked
    against exact references; refusals (a non-member, a root outside the set, a set added
    twice, a removed set) name the set and the rank; 3LC error feedback is kept per set. The
    sets' results differ, so the cross-rank checks run inside the job (expect_hashes=False)."""
    job = assert_ok(run_job(n, "process_sets", env={"THREELC_LOG_LEVEL": "info"}),
                    expect_hashes=False)
    added = [l for l in job.stderr.splitlines() if "process set 1 added: ranks" in l]
    assert len(added) == n, job.describe()
