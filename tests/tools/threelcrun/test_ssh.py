"""threelcrun's ssh path for real: a throwaway sshd on a loopback port, "127.0.0.1" as the
remote host (any name other than localhost and this machine's hostname goes through ssh)."""

import json
import os
import re
import signal
import time
from pathlib import Path

import pytest

from launcher_jobs import HELPER, launch, pid_gone, read_pids, wait_for
from support.paths import PYTHON, REPO, library_available
from support.rank_jobs import JobOptions, start_job, threelcrun
from support.sanitized_ranks import threelcrun_options

HOSTS = ["-H", "localhost:2,127.0.0.1:2"]


def all_cmdlines():
    result = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    result[int(entry)] = f.read()
            except OSError:
                pass
    return result


@pytest.mark.skipif(not library_available(), reason="libthreelc.so is not built")
def test_ssh_env_output_and_secret(sshd, tmp_path, run_env):
    go = tmp_path / "go"
    job = start_job(threelcrun(4, [PYTHON, HELPER, "env", tmp_path, go],
                               [*HOSTS, *sshd.ssh_args(), "--sparsity", "1.25",
                                "-x", "FOO=two words",
                                # the ranks load libthreelc.so: in a sanitizer build, its runtime
                                *threelcrun_options()]),
                    JobOptions(env=run_env, cwd=tmp_path, timeout=30, scale_timeout=False))
    proc = job.proc
    try:
        assert wait_for(lambda: len(list(tmp_path.glob("env.*.json"))) == 4, 30), \
            proc.stderr.read() if proc.poll() is not None else "ranks did not start"
        envs = [json.loads((tmp_path / f"env.{r}.json").read_text()) for r in range(4)]
        secret = envs[0]["THREELC_SECRET"].encode()
        # While every rank runs: the secret is on no process's command line (ssh clients,
        # sshd sessions, remote shells, ranks).
        leaks = [pid for pid, cmd in all_cmdlines().items() if secret in cmd]
        assert leaks == []
        ssh_clients = [cmd for cmd in all_cmdlines().values() if cmd.startswith(b"ssh\0")]
        assert len(ssh_clients) == 2 and all(b"read -r THREELC_SECRET" in c for c in ssh_clients)
    finally:
        go.touch()
        ended = job.wait()
    out, err = ended.stdout, ended.stderr
    assert proc.returncode == 0, err
    coordinator = envs[0]["THREELC_COORDINATOR"]
    assert re.fullmatch(r"127\.0\.0\.1:\d+", coordinator)
    expect = [("0", "2", "0", "2"), ("1", "2", "0", "2"), ("0", "2", "1", "2"), ("1", "2", "1", "2")]
    for rank, e in enumerate(envs):
        assert e["THREELC_RANK"] == str(rank) and e["THREELC_SIZE"] == "4"
        assert (e["THREELC_LOCAL_RANK"], e["THREELC_LOCAL_SIZE"], e["THREELC_CROSS_RANK"],
                e["THREELC_CROSS_SIZE"]) == expect[rank]
        assert e["THREELC_SECRET"].encode() == secret
        assert e["THREELC_COORDINATOR"] == coordinator
        assert e["THREELC_SPARSITY"] == "1.25"
        assert e["FOO"] == "two words"
        assert e["PYTHONPATH"].split(":")[0] == str(REPO / "frameworks" / "python")
        assert Path(e["threelc_file"]).resolve().is_relative_to(REPO / "frameworks" / "python")
        assert e["cwd"] == str(tmp_path)
    # ranks 2 and 3 ran under sshd, not as children of threelcrun
    assert envs[2]["pid"] != envs[0]["pid"]
    assert sorted(out.splitlines()) == [f"[{r}] env written by rank {r}" for r in range(4)]
    assert sorted(err.splitlines()) == [f"[{r}] stderr of rank {r}" for r in range(4)]


SCRIPT = ('echo $$ > "{d}/rank$THREELC_RANK.pid"; sleep 60 & echo $! > "{d}/child$THREELC_RANK.pid"; '
          'echo "line from $THREELC_RANK"; {action} wait')


def test_ssh_remote_rank_fails_the_job(sshd, tmp_path, run_env):
    script = SCRIPT.format(d=tmp_path, action='[ "$THREELC_RANK" = 3 ] && { sleep 1; exit 7; };')
    start = time.monotonic()
    r = launch(["-np", 4, *HOSTS, *sshd.ssh_args(), "--grace", "2", "sh", "-c", script], run_env,
               timeout=30)
    assert r.returncode == 7, r.stderr
    assert time.monotonic() - start < 10
    assert re.search(r"threelcrun: rank 3 \(ssh pid \d+ to 127\.0\.0\.1\) exited with code 7; "
                     r"stopping the other ranks", r.stderr), r.stderr
    assert sorted(r.stdout.splitlines()) == [f"[{i}] line from {i}" for i in range(4)]
    pids = read_pids(tmp_path)
    assert len(pids) == 8
    assert wait_for(lambda: all(pid_gone(p) for p in pids.values()), 5), pids


def test_ssh_local_failure_stops_remote_ranks(sshd, tmp_path, run_env):
    script = SCRIPT.format(d=tmp_path, action='[ "$THREELC_RANK" = 0 ] && { sleep 1; kill -9 $$; };')
    r = launch(["-np", 4, *HOSTS, *sshd.ssh_args(), "sh", "-c", script], run_env, timeout=30)
    assert r.returncode == 137
    assert "rank 0 (pid" in r.stderr and "killed by signal 9 (SIGKILL)" in r.stderr
    pids = read_pids(tmp_path)
    assert wait_for(lambda: all(pid_gone(p) for p in pids.values()), 5), pids


def test_ssh_remote_rank_killed(sshd, tmp_path, run_env):
    script = SCRIPT.format(d=tmp_path, action='[ "$THREELC_RANK" = 2 ] && { sleep 1; kill -9 $$; };')
    r = launch(["-np", 3, "-H", "localhost:1,127.0.0.1:2", *sshd.ssh_args(), "sh", "-c", script],
               run_env, timeout=30)
    assert r.returncode == 137
    assert re.search(r"rank 2 \(ssh pid \d+ to 127\.0\.0\.1\) exited with code 137 \(the remote "
                     r"rank was probably killed by signal 9 \(SIGKILL\)\)", r.stderr), r.stderr
    pids = read_pids(tmp_path)
    assert wait_for(lambda: all(pid_gone(p) for p in pids.values()), 5), pids


@pytest.mark.parametrize("how", ["sigint", "kill-launcher", "kill-ssh-client"])
def test_ssh_teardown(how, sshd, tmp_path, run_env):
    script = SCRIPT.format(d=tmp_path, action="")
    job = start_job(threelcrun(4, ["sh", "-c", script], [*HOSTS, *sshd.ssh_args()]),
                    JobOptions(env=run_env, timeout=20, scale_timeout=False))
    proc = job.proc
    assert wait_for(lambda: len(read_pids(tmp_path)) == 8, 20), "ranks did not start"
    pids = read_pids(tmp_path)
    if how == "sigint":
        proc.send_signal(signal.SIGINT)
        err = job.wait().stderr
        assert proc.returncode == 130, err
    elif how == "kill-launcher":
        proc.kill()  # no cleanup by threelcrun at all
        job.wait()
    else:
        ssh_pids = [pid for pid, cmd in all_cmdlines().items() if cmd.startswith(b"ssh\0")
                    and b"read -r THREELC_SECRET" in cmd and b"-T" in cmd]
        ssh_pids = [p for p in ssh_pids if Path(f"/proc/{p}/stat").exists()
                    and int(Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[1])
                    == proc.pid]
        assert len(ssh_pids) == 2
        os.kill(ssh_pids[0], signal.SIGKILL)
        err = job.wait().stderr
        assert proc.returncode == 137, err
        assert f"ssh pid {ssh_pids[0]} to 127.0.0.1) was killed by signal 9" in err
    assert wait_for(lambda: all(pid_gone(p) for p in pids.values()), 10), \
        {n: p for n, p in pids.items() if not pid_gone(p)}


def test_ssh_unreachable_host_fails(sshd, tmp_path, run_env):
    # A port nobody listens on: ssh exits 255 and the job fails with a hint.
    r = launch(["-np", 2, "-H", "localhost:1,127.0.0.1:1", "--ssh-port", "1",
                "--ssh-option", "ConnectTimeout=5", "sleep", "30"], run_env, timeout=30)
    assert r.returncode == 255
    assert "rank 1 (ssh pid" in r.stderr and "ssh itself failed" in r.stderr


@pytest.mark.skipif(not library_available(), reason="libthreelc.so is not built")
@pytest.mark.parametrize("hosts,remote_ranks", [
    ("hostfile", [0, 1]),                 # a hostfile line "::1 slots=2": both ranks over ssh
    ("[::1]:1,localhost:1", [0]),         # -H: rank 0 over ssh, rank 1 here dials [::1]
])
def test_ssh_ipv6_job(hosts, remote_ranks, sshd, tmp_path, run_env):
    if not sshd.ipv6:
        pytest.skip("::1 is not up on this machine: the test sshd listens on 127.0.0.1 only")
    run_env.pop("SSH_CONNECTION", None)  # in case this test itself runs in an ssh session
    if hosts == "hostfile":
        hostfile = tmp_path / "hosts"
        hostfile.write_text("# IPv6 loopback, bare\n::1 slots=2\n")
        host_args = ["--hostfile", hostfile]
    else:
        host_args = ["-H", hosts]
    r = launch(["-np", 2, *host_args, *sshd.ssh_args(), *threelcrun_options(),
                PYTHON, HELPER, "allreduce", tmp_path], run_env, cwd=tmp_path, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    envs = [json.loads((tmp_path / f"env.{rank}.json").read_text()) for rank in range(2)]
    coordinator = envs[0]["THREELC_COORDINATOR"]
    assert re.fullmatch(r"\[::1\]:\d+", coordinator), coordinator
    for rank, e in enumerate(envs):
        assert e["THREELC_RANK"] == str(rank) and e["THREELC_COORDINATOR"] == coordinator
        assert e["sum"] == 3.0  # 1 + 2: the ranks met at [::1] and reduced
    # sshd set SSH_CONNECTION ("client port server port") for the ranks it started: over ::1
    for rank, e in enumerate(envs):
        if rank in remote_ranks:
            assert e["SSH_CONNECTION"].split()[2:] == ["::1", str(sshd.port)], e["SSH_CONNECTION"]
        else:
            assert e["SSH_CONNECTION"] is None
    assert sorted(r.stdout.splitlines()) == [f"[{rank}] allreduce written by rank {rank}"
                                             for rank in range(2)]
