"""tools/eval/emulate_cluster with real network namespaces, veth links, tc shaping and rank
processes.

Needs root and `ip netns` (CI runs as root); skipped otherwise, except the refusal test.
Run: /usr/bin/python3 -m pytest -q tests/tools/eval
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import time

import pytest

from support.paths import PYTHON, REPO, THREELCRUN
from support.rank_jobs import JobOptions, RankJob, rank_lines as rank_jobs_lines, run_job, start_job
from support.sanitized_ranks import TIMEOUT_SCALE, threelcrun_options

TOOL = REPO / "tools" / "eval" / "emulate_cluster"
EVALUATE = REPO / "tools" / "eval" / "evaluate"
WORKER = REPO / "tests" / "engine" / "jobs" / "worker.py"

# In a sanitizer build only the threelc job's ranks load libthreelc.so: they get the
# sanitizer's runtime through threelcrun -x. Nothing else this file starts may have it
# preloaded: procps tools (pgrep, here and in tools/eval/emulate_cluster's checks) hang at start-up
# with libasan preloaded.
SANITIZER_OPTIONS = threelcrun_options()
os.environ.pop("LD_PRELOAD", None)


def netns_usable() -> bool:
    if os.geteuid() != 0:
        return False
    return subprocess.run(["ip", "netns", "list"], capture_output=True).returncode == 0


needs_netns = pytest.mark.skipif(not netns_usable(), reason="needs root and ip netns")


def namespaces() -> list[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def leftovers(name: str) -> list[str]:
    left = [ns for ns in namespaces() if ns.startswith(name + "-")]
    left += [f"/etc/netns/{d}" for d in (os.listdir("/etc/netns") if os.path.isdir("/etc/netns")
                                         else []) if d.startswith(name + "-")]
    return left


def emulate(*args: str, timeout: float = 120) -> RankJob:
    return run_job([PYTHON, TOOL, *args],
                   JobOptions(cwd=REPO, timeout=timeout, scale_timeout=False))


def rank_lines(stdout: str) -> dict[int, str]:
    """rank -> its last line."""
    return {rank: lines[-1] for rank, lines in rank_jobs_lines(stdout).items()}


def test_refuses_clearly_without_root():
    command = [PYTHON, str(TOOL), "--hosts", "2", "--", "true"]
    if os.geteuid() == 0:
        command = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *command]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc
    assert "must run as root" in proc.stderr, proc.stderr


@needs_netns
def test_every_rank_runs_on_its_own_host_with_the_coordinator_on_host_0():
    proc = emulate("--hosts", "3", "--rate", "1gbit", "--name", "tecoord", "--", "sh", "-c",
                   'echo "$THREELC_RANK $(hostname) $(ip -4 -o addr show eth0 | '
                   'awk \'{print $4}\') $THREELC_COORDINATOR $THREELC_CROSS_SIZE"')
    assert proc.returncode == 0, proc
    lines = rank_lines(proc.stdout)
    assert sorted(lines) == [0, 1, 2], proc.stdout
    for rank, text in lines.items():
        got_rank, host, address, coordinator, cross_size = text.split()
        assert got_rank == str(rank)
        assert host == f"tecoord-h{rank}"
        assert address == f"10.77.0.{rank + 1}/24"
        assert coordinator.startswith("tecoord-h0:")
        assert cross_size == "3"
    assert leftovers("tecoord") == []


@needs_netns
def test_links_carry_no_more_than_their_rate():
    # iperf3 from host 1 to host 0 over a 100 Mbit/s link: tbf holds it to the rate (an
    # unshaped veth carries tens of Gbit/s here).
    proc = emulate("--hosts", "2", "--rate", "100mbit", "--name", "terate", "--launcher", "--",
                   "iperf3 -s -1 -D >/dev/null && sleep 0.3 && "
                   "ssh terate-h1 iperf3 -c 10.77.0.1 -t 2 -J")
    assert proc.returncode == 0, proc
    result = json.loads(proc.stdout)
    bits_per_second = result["end"]["sum_received"]["bits_per_second"]
    assert 0 < bits_per_second <= 100e6 * 1.05, bits_per_second
    assert leftovers("terate") == []


@needs_netns
def test_a_failing_rank_stops_the_job_and_everything_is_torn_down():
    proc = emulate("--hosts", "3", "--name", "tefail", "--", "sh", "-c",
                   '[ "$THREELC_RANK" = 1 ] && exit 3; sleep 60')
    assert proc.returncode == 3, proc
    assert "rank 1" in proc.stderr and "exited with code 3" in proc.stderr, proc.stderr
    assert leftovers("tefail") == []


@needs_netns
def test_an_interrupt_tears_everything_down():
    job = start_job([PYTHON, TOOL, "--hosts", "2", "--name", "teint", "--", "sleep", "300"],
                    JobOptions(cwd=REPO, timeout=60, scale_timeout=False))
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and sorted(leftovers("teint"))[:3] != [
            "/etc/netns/teint-h0", "/etc/netns/teint-h1", "teint-h0"]:
        time.sleep(0.2)
    # Both hosts' sleeps must have started before the interrupt.
    while time.monotonic() < deadline and len(
            subprocess.run(["pgrep", "-f", "^sleep 300$"], capture_output=True,
                           text=True).stdout.split()) < 2:
        time.sleep(0.2)
    job.proc.send_signal(signal.SIGINT)
    ended = job.wait()
    stderr = ended.stderr
    assert ended.returncode == 130, stderr
    assert "interrupted; tearing down" in stderr
    assert leftovers("teint") == []
    assert subprocess.run(["pgrep", "-f", "^sleep 300$"], capture_output=True).returncode == 1


@needs_netns
def test_a_threelc_job_runs_across_the_emulated_hosts():
    # The engine's own job test, one rank per host, over the shaped links.
    job = [PYTHON, str(WORKER), "sizes"]
    run = ["--", *job]
    if SANITIZER_OPTIONS:
        # emulate_cluster's own threelcrun line, plus the sanitizer's -x options.
        run = ["--launcher", "--", shlex.join(
            [PYTHON, str(THREELCRUN), "-np", "3", "-H", "tejob-h0:1,tejob-h1:1,tejob-h2:1",
             *SANITIZER_OPTIONS, "--", *job])]
    proc = emulate("--hosts", "3", "--rate", "1gbit", "--name", "tejob", *run,
                   timeout=300 * TIMEOUT_SCALE)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    for rank in range(3):
        assert any(line.startswith(f"[{rank}] DONE sizes") for line in lines), proc.stdout[-3000:]
    assert leftovers("tejob") == []


@needs_netns
@pytest.mark.skipif(bool(SANITIZER_OPTIONS), reason="a benchmark run: under a sanitizer it "
                    "measures the sanitizer and runs past its limit; the job case above covers "
                    "threelc across emulated hosts")
def test_evaluate_measures_every_system_and_writes_its_report(tmp_path):
    # The smallest evaluation: one rate, one size, one round, no training; every system must
    # produce a measurement, the report its table with ratios to gloo, and the plots.
    out = tmp_path / "eval"
    proc = run_job([PYTHON, EVALUATE, "--rates", "1gbit", "--sizes-mb", "1",
                    "--sparsities", "1.0,1.5", "--rounds", "1", "--only", "allreduce",
                    "--out", out], JobOptions(cwd=REPO, timeout=600, scale_timeout=False))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    labels = {r["label"] for r in records}
    assert labels == {"threelc 3LC s=1.0", "threelc 3LC s=1.5", "threelc 3LC ring s=1.0",
                      "threelc none", "gloo", "Open MPI"}, proc.stderr[-3000:]
    by_label = {r["label"]: r for r in records}
    # 3LC puts far fewer bits per value on the wire than the 48 of the uncompressed push_pull
    # (4 ranks: 3/4 of 32 bits out, 3/4 of 32 bits back).
    assert by_label["threelc none"]["bits_per_value"] == 48.0
    assert by_label["threelc 3LC s=1.0"]["bits_per_value"] < 4
    report = (out / "report.md").read_text()
    assert "| gloo | " in report and "(1.00x)" in report, report
    assert "| Open MPI | " in report, report
    for png in ("allreduce_time_vs_bandwidth.png", "bits_per_value_vs_sparsity.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert leftovers("ev") == [] and leftovers("evmpi") == []


@needs_netns
@pytest.mark.skipif(bool(SANITIZER_OPTIONS), reason="a benchmark run: under a sanitizer it "
                    "measures the sanitizer and runs past its limit")
def test_evaluate_trains_with_the_peers_and_reports_ratios_to_ddp(tmp_path):
    # Training only, cut short: threelc's 3LC through the Horovod API and two of the peers a
    # user has without threelc, on an emulated 10 Gbit/s link and on loopback (threelcrun's
    # ranks on this machine, no emulated link). Every run must be recorded with its bytes, and
    # the report must give each method's figures as ratios to DDP's from the same run.
    out = tmp_path / "eval"
    methods = "threelc 3LC,DDP,DDP PowerSGD r1"
    proc = run_job([PYTHON, EVALUATE, "--only", "training",
                    "--training-rates", "loopback,10gbit", "--models", "cnn",
                    "--methods", methods, "--epochs", "2", "--max-steps", "6",
                    "--training-rounds", "1", "--target-accuracy", "0.3", "--out", out],
                   JobOptions(cwd=REPO, timeout=900, scale_timeout=False))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert sorted((r["rate"], r["label"]) for r in records) == sorted(
        (rate, label) for rate in ("loopback", "10gbit") for label in methods.split(",")), \
        proc.stderr[-3000:]
    for r in records:
        assert r["model"] == "cnn" and len(r["epochs"]) == 2 and r["summary"]["steps"] == 12, r
    by = {(r["rate"], r["label"]): r["summary"] for r in records}
    # 3LC and PowerSGD (after its uncompressed start) send fewer bytes than DDP.
    assert by[("10gbit", "threelc 3LC")]["bytes_sent_per_rank"] * 5 < \
        by[("10gbit", "DDP")]["mb_sent_per_rank"] * 1e6
    report = (out / "report.md").read_text()
    for rate in ("loopback", "10gbit"):
        assert f"### Training cnn at {rate}" in report, report
    assert "| DDP | " in report and "(1.00x)" in report, report
    assert "| DDP PowerSGD r1 | " in report and "| threelc 3LC | " in report, report
    # The fast-link target's verdict for each rate, and the row of the choice table.
    for rate in ("loopback", "10gbit"):
        assert f"- cnn {rate} threelc 3LC: step " in report, report
        assert f"| cnn | {rate} | " in report, report
    assert (out / "accuracy_vs_time_cnn.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert leftovers("evt") == []
