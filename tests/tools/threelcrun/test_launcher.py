"""threelcrun with local ranks: environment, output prefixing, failures, signals, arguments."""

import importlib.machinery
import importlib.util
import json
import os
import re
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from launcher_jobs import HELPER, launch, pid_gone, read_pids, wait_for
from support.paths import PYTHON, REPO, THREELCRUN, library_available
from support.rank_jobs import JobOptions, start_job as start_ranks, threelcrun

needs_library = pytest.mark.skipif(not library_available(),
                                   reason="libthreelc.so is not built (tools/build.sh) and "
                                          "THREELC_LIBRARY is not set")


def load_launcher_module():
    loader = importlib.machinery.SourceFileLoader("threelcrun_module", str(THREELCRUN))
    spec = importlib.util.spec_from_loader("threelcrun_module", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


tr = load_launcher_module()


def read_envs(directory, n):
    return [json.loads((Path(directory) / f"env.{r}.json").read_text()) for r in range(n)]


# ------------------------------------------------------------------------------- env vars

@needs_library
@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_env_local(n, tmp_path, run_env):
    run_env["PYTHONPATH"] = "/caller/path"
    r = launch(["-np", n, PYTHON, HELPER, "env", tmp_path], run_env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    envs = read_envs(tmp_path, n)
    secret = envs[0]["THREELC_SECRET"]
    coordinator = envs[0]["THREELC_COORDINATOR"]
    assert re.fullmatch(r"[0-9a-f]{64}", secret)
    assert re.fullmatch(r"127\.0\.0\.1:\d+", coordinator)
    assert 0 < int(coordinator.split(":")[1]) < 65536
    for rank, e in enumerate(envs):
        assert e["THREELC_RANK"] == str(rank)
        assert e["THREELC_SIZE"] == str(n)
        assert e["THREELC_LOCAL_RANK"] == str(rank)
        assert e["THREELC_LOCAL_SIZE"] == str(n)
        assert e["THREELC_CROSS_RANK"] == "0"
        assert e["THREELC_CROSS_SIZE"] == "1"
        assert e["THREELC_SECRET"] == secret
        assert e["THREELC_COORDINATOR"] == coordinator
        assert e["PYTHONPATH"] == f"{REPO / 'frameworks' / 'python'}:/caller/path"
        assert Path(e["threelc_file"]).resolve().is_relative_to(REPO / "frameworks" / "python")
        assert e["cwd"] == str(tmp_path)
        for unset in ("THREELC_TRANSPORT", "THREELC_COMPRESSION", "THREELC_SPARSITY",
                      "THREELC_TIMELINE", "THREELC_START_TIMEOUT"):
            assert e[unset] is None
        # Ranks sharing a host get one OpenMP thread each (as under torchrun); alone, none set.
        assert e["OMP_NUM_THREADS"] == ("1" if n > 1 else None)
    assert sorted(r.stdout.splitlines()) == [f"[{i}] env written by rank {i}" for i in range(n)]
    assert sorted(r.stderr.splitlines()) == [f"[{i}] stderr of rank {i}" for i in range(n)]


@needs_library
def test_omp_num_threads_of_the_caller_is_kept(tmp_path, run_env):
    run_env["OMP_NUM_THREADS"] = "3"
    assert launch(["-np", 2, PYTHON, HELPER, "env", tmp_path], run_env).returncode == 0
    assert [e["OMP_NUM_THREADS"] for e in read_envs(tmp_path, 2)] == ["3", "3"]


@needs_library
def test_secret_is_fresh_per_job(tmp_path, run_env):
    secrets = []
    for job in range(2):
        d = tmp_path / str(job)
        d.mkdir()
        assert launch(["-np", 1, PYTHON, HELPER, "env", d], run_env).returncode == 0
        secrets.append(read_envs(d, 1)[0]["THREELC_SECRET"])
    assert secrets[0] != secrets[1]


@needs_library
def test_flags_set_env(tmp_path, run_env):
    run_env["FORWARDED"] = "from launcher"
    r = launch(["-np", 2, "--transport", "ucx", "--compression", "none", "--sparsity", "1.5",
                "--timeline", "tl.json", "--start-timeout", "30", "--port", "23456",
                "-x", "FOO=a b=c", "-x", "FORWARDED", PYTHON, HELPER, "env", tmp_path], run_env)
    assert r.returncode == 0, r.stderr
    for e in read_envs(tmp_path, 2):
        assert e["THREELC_TRANSPORT"] == "ucx"
        assert e["THREELC_COMPRESSION"] == "none"
        assert e["THREELC_SPARSITY"] == "1.5"
        assert e["THREELC_TIMELINE"] == "tl.json"
        assert e["THREELC_START_TIMEOUT"] == "30.0"
        assert e["THREELC_COORDINATOR"] == "127.0.0.1:23456"
        assert e["FOO"] == "a b=c"
        assert e["FORWARDED"] == "from launcher"


@needs_library
def test_local_names_are_one_host(tmp_path, run_env):
    # "localhost" and this machine's hostname name the same machine: one host, 4 slots.
    hostname = socket.gethostname()
    r = launch(["-np", 4, "-H", f"localhost:2,{hostname}:2", PYTHON, HELPER, "env", tmp_path],
               run_env)
    assert r.returncode == 0, r.stderr
    for rank, e in enumerate(read_envs(tmp_path, 4)):
        assert (e["THREELC_LOCAL_RANK"], e["THREELC_LOCAL_SIZE"]) == (str(rank), "4")
        assert (e["THREELC_CROSS_RANK"], e["THREELC_CROSS_SIZE"]) == ("0", "1")
        assert e["THREELC_COORDINATOR"].startswith("127.0.0.1:")


# ---------------------------------------------- placement (in-process; host forms: test_hosts.py)

def test_rank_placement():
    hosts = tr.merge_hosts([("nodeA", 2), ("nodeB", 3), ("nodeA", 1), ("nodeC", 4)])
    assert hosts == [("nodeA", 3), ("nodeB", 3), ("nodeC", 4)]
    p = tr.assign_ranks(hosts, 5)  # nodeC gets no rank: not in use
    assert [(x["host"], x["local_rank"], x["local_size"], x["cross_rank"], x["cross_size"])
            for x in p] == [("nodeA", 0, 3, 0, 2), ("nodeA", 1, 3, 0, 2), ("nodeA", 2, 3, 0, 2),
                            ("nodeB", 0, 2, 1, 2), ("nodeB", 1, 2, 1, 2)]
    assert not any(x["local"] for x in p)
    assert tr.coordinator_host(p) == "nodeA"
    with pytest.raises(tr.UsageError, match="only 10 slots"):
        tr.assign_ranks(hosts, 11)
    local = tr.assign_ranks(tr.merge_hosts([("localhost", 1), ("127.0.0.1", 1)]), 2)
    assert [x["local"] for x in local] == [True, False]  # 127.0.0.1 goes through ssh
    assert tr.coordinator_host(local) == "127.0.0.1"
    mixed = tr.assign_ranks(tr.merge_hosts([("localhost", 1), ("nodeB", 1)]), 2)
    assert tr.coordinator_host(mixed) == socket.gethostname()


def test_remote_command_quoting():
    cmd = tr.remote_command({"A": "x y", "B": "it's"}, ["echo", "$HOME", "a;b"], "/tmp/d ir", 5,
                            "/repo/frameworks/python")
    assert "THREELC_SECRET=" not in cmd
    argv = tr.ssh_argv(tr.parse_args(["-np", "1", "--ssh-option", "Foo=bar", "--ssh-port", "2222",
                                      "--ssh-identity", "/k", "true"]), "host", "REMOTE")
    assert argv[:4] == ["ssh", "-T", "-o", "BatchMode=yes"]
    assert argv.index("Foo=bar") < argv.index("StrictHostKeyChecking=accept-new")
    assert argv[-2:] == ["host", "REMOTE"] and "-p" in argv and "2222" in argv and "/k" in argv


def test_remote_command_runs_under_sh(tmp_path):
    # The remote command line, run by a local sh as sshd would: secret from stdin, env, quoting.
    d = tmp_path / "d ir"
    d.mkdir()
    cmd = tr.remote_command({"A": "x y", "B": "it's"},
                            ["sh", "-c", 'echo "$A|$B|$THREELC_SECRET|$PYTHONPATH|$1|$(pwd)"',
                             "sh", "a;b $HOME"], str(d), 1, "/repo/fw")
    p = subprocess.Popen(["sh", "-c", cmd], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True,
                         env={"PATH": os.environ["PATH"], "PYTHONPATH": "/old"})
    p.stdin.write("s3cret\n")
    p.stdin.flush()  # stdin stays open: its EOF would stop the rank
    out = p.stdout.read()
    assert p.wait(timeout=20) == 0, p.stderr.read()
    p.stdin.close()
    assert out == f"x y|it's|s3cret|/repo/fw:/old|a;b $HOME|{d}\n"


def test_remote_command_stops_rank_on_stdin_eof(tmp_path):
    # EOF on stdin (ssh gone) -> SIGTERM to the rank's process group, SIGKILL after the grace.
    cmd = tr.remote_command({}, ["sh", "-c", 'trap "" TERM; echo $$; sleep 60 & echo $!; wait'],
                            str(tmp_path), 1, "/repo/fw")
    p = subprocess.Popen(["sh", "-c", cmd], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         text=True)
    p.stdin.write("s3cret\n")
    p.stdin.flush()
    pids = [int(p.stdout.readline()), int(p.stdout.readline())]
    start = time.monotonic()
    p.stdin.close()
    assert p.wait(timeout=10) in (137, 143)
    assert 0.9 < time.monotonic() - start < 5  # the shell ignores TERM: killed after 1 s
    assert wait_for(lambda: all(pid_gone(x) for x in pids), 5)


# ------------------------------------------------------------------------------- output

def test_output_prefixed_per_line(run_env):
    n, lines = 4, 300
    r = launch(["-np", n, PYTHON, HELPER, "lines", lines], run_env)
    assert r.returncode == 0, r.stderr
    out = r.stdout.splitlines()
    err = r.stderr.splitlines()
    assert len(out) == n * (lines + 1) and len(err) == n * lines
    for rank in range(n):
        mine = [l for l in out if l.startswith(f"[{rank}] ")]
        expect = [f"[{rank}] out {rank} {i} " + "x" * (i * 37 % 3000) for i in range(lines)]
        assert mine == expect + [f"[{rank}] tail {rank} without newline"]
        assert [l for l in err if l.startswith(f"[{rank}] ")] == \
            [f"[{rank}] err {rank} {i}" for i in range(lines)]


def test_all_ranks_succeed(run_env):
    r = launch(["-np", 3, "sh", "-c", "exit 0"], run_env)
    assert (r.returncode, r.stdout, r.stderr) == (0, "", "")


# ---------------------------------------------------------------------------- failures

RANK_SCRIPT = ('echo $$ > "$D/rank$THREELC_RANK.pid"; sleep 60 & echo $! > "$D/child$THREELC_RANK.pid"; '
               '{action} wait')


def test_rank_killed_by_signal(tmp_path, run_env):
    run_env["D"] = str(tmp_path)
    script = RANK_SCRIPT.format(action='[ "$THREELC_RANK" = 1 ] && { sleep 1; kill -9 $$; };')
    start = time.monotonic()
    r = launch(["-np", 4, "sh", "-c", script], run_env, timeout=30)
    took = time.monotonic() - start
    assert r.returncode == 137
    assert took < 10
    assert re.search(r"threelcrun: rank 1 \(pid \d+ on localhost\) was killed by signal 9 "
                     r"\(SIGKILL\); stopping the other ranks", r.stderr), r.stderr
    pids = read_pids(tmp_path)
    assert len(pids) == 8
    # every rank and child, rank 1's orphaned child too (its group ends with the rank)
    assert wait_for(lambda: all(pid_gone(p) for p in pids.values()), 5), pids


def test_rank_exit_code(tmp_path, run_env):
    run_env["D"] = str(tmp_path)
    script = RANK_SCRIPT.format(action='[ "$THREELC_RANK" = 2 ] && exit 3;')
    start = time.monotonic()
    r = launch(["-np", 3, "sh", "-c", script], run_env, timeout=30)
    assert r.returncode == 3
    assert time.monotonic() - start < 10
    m = re.search(r"threelcrun: rank 2 \(pid (\d+) on localhost\) exited with code 3; "
                  r"stopping the other ranks", r.stderr)
    assert m, r.stderr
    pids = read_pids(tmp_path)
    assert pids["rank2.pid"] == int(m.group(1))
    assert wait_for(lambda: all(pid_gone(p) for p in pids.values()), 5)


def test_command_not_found(run_env):
    r = launch(["-np", 2, "/nonexistent/command"], run_env)
    assert r.returncode == 127
    assert "/nonexistent/command" in r.stderr


def start_job(tmp_path, run_env, n, script, extra=()):
    """A job of `n` ranks running `script`, once each rank has written its pid files; the
    RunningJob's wait() gives its end within 15 s."""
    run_env["D"] = str(tmp_path)
    job = start_ranks(threelcrun(n, ["sh", "-c", script], extra),
                      JobOptions(env=run_env, timeout=15, scale_timeout=False))
    assert wait_for(lambda: len(read_pids(tmp_path)) == 2 * n, 15), "ranks did not start"
    return job, read_pids(tmp_path)


@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_signal_stops_every_rank(sig, code, tmp_path, run_env):
    job, pids = start_job(tmp_path, run_env, 3, RANK_SCRIPT.format(action=""))
    job.proc.send_signal(sig)
    err = job.wait().stderr
    assert job.proc.returncode == code, err
    assert f"received {signal.Signals(sig).name}; stopping all ranks" in err
    assert wait_for(lambda: all(pid_gone(p) for p in pids.values()), 5), pids


def test_sigkill_after_grace(tmp_path, run_env):
    # Ranks that ignore SIGTERM are killed after --grace.
    script = 'trap "" TERM; ' + RANK_SCRIPT.format(action="")
    job, pids = start_job(tmp_path, run_env, 2, script, ["--grace", "1"])
    start = time.monotonic()
    job.proc.send_signal(signal.SIGINT)
    err = job.wait().stderr
    assert job.proc.returncode == 130
    assert 0.9 < time.monotonic() - start < 6
    assert "sending SIGKILL" in err
    assert wait_for(lambda: all(pid_gone(p) for p in pids.values()), 5)


def test_launcher_killed_ranks_stop(tmp_path, run_env):
    # threelcrun dies without stopping anything: its watchdog stops the ranks' process groups.
    script = RANK_SCRIPT.format(action="")
    job, pids = start_job(tmp_path, run_env, 2, script)
    job.proc.kill()
    job.proc.wait()
    assert wait_for(lambda: all(pid_gone(p) for p in pids.values()), 5)
    job.wait()  # its pipes


# ---------------------------------------------------------------------------- arguments

@pytest.mark.parametrize("args,message", [
    (["-np", "0", "true"], "-np 0: need at least 1 rank"),
    (["-np", "-2", "true"], "need at least 1 rank"),
    (["true"], "-np N is required"),
    (["-np", "2"], "missing the command"),
    (["-np", "5", "-H", "a:2,b:2", "true"], "-np 5 but the hosts have only 4 slots"),
    (["-np", "1", "-H", "a:zero", "true"], "'a:zero': 'zero' is not a whole number"),
    (["-np", "1", "-H", "a:0", "true"], "a host needs at least 1"),
    (["-np", "1", "-H", "a,,b", "true"], "empty host entry"),
    (["-np", "1", "-H", "a", "--hostfile", "f", "true"], "not both"),
    (["-np", "1", "--hostfile", "/nonexistent/hosts", "true"], "--hostfile /nonexistent/hosts"),
    (["-np", "1", "-x", "THREELC_TEST_UNSET_VAR", "true"], "is not set in threelcrun's environment"),
    (["-np", "1", "-x", "1BAD=x", "true"], "not a variable name"),
    (["-np", "1", "--sparsity", "2.5", "true"], "must be in [1, 2)"),
    (["-np", "1", "--port", "70000", "true"], "must be in 1..65535"),
    (["-np", "1", "--transport", "udp", "true"], "invalid choice"),
])
def test_bad_arguments(args, message, run_env):
    r = launch(args, run_env)
    assert r.returncode == 2
    assert message in r.stderr
    assert "usage: threelcrun" in r.stderr


def test_double_dash_and_options_after_command(run_env):
    r = launch(["-np", "1", "--", "sh", "-c", "echo $0 $1", "-np", "-H"], run_env)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "[0] -np -H\n"


def test_help_documents_everything(run_env):
    r = launch(["--help"], run_env)
    assert r.returncode == 0
    for word in ["THREELC_RANK", "THREELC_SIZE", "THREELC_LOCAL_RANK", "THREELC_LOCAL_SIZE",
                 "THREELC_CROSS_RANK", "THREELC_CROSS_SIZE", "THREELC_COORDINATOR",
                 "THREELC_SECRET", "PYTHONPATH", "THREELC_TRANSPORT", "THREELC_COMPRESSION",
                 "THREELC_SPARSITY", "THREELC_TIMELINE", "THREELC_START_TIMEOUT",
                 "--hostfile", "--grace", "--ssh-port", "THREELC_SSH_PORT", "--ssh-identity",
                 "--ssh-option", "mpirun", "srun", "torchrun", "OMPI_COMM_WORLD_RANK",
                 "SLURM_PROCID", "MASTER_ADDR", "MASTER_PORT+1", "127.0.0.1"]:
        assert word in r.stdout, word
