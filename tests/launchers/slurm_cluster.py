"""A real single-node Slurm cluster for the tests: munged, slurmctld and slurmd of Debian's
packages, started as root in a private temporary folder with a configuration of their own.

Nothing outside that folder is written or read: the daemons and every client take SLURM_CONF
(the folder's slurm.conf; /etc/slurm/slurm.conf is never touched) and AuthInfo names the
folder's own munged socket and key. The node is this host (its short name, as slurmd calls it)
at 127.0.0.1 with 4 CPUs, whatever the machine has (SlurmdParameters=config_overrides), so that
jobs of 4 ranks run on a 2-core CI machine. slurmd always loads a cgroup plugin, even with
proctrack/linuxproc and task/none: cgroup.conf names cgroup/v1, since the v2 autodetection fails
in containers.

``slurm_cluster`` (module scope) yields a ``SlurmCluster``: ``env`` (what srun and sbatch
need), ``directory``. Teardown cancels the cluster's jobs and stops the daemons it started
(SIGTERM, SIGKILL after 10 s).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from launched_jobs import require
from threelc.launcher.environment import free_port

# binary -> the Debian package that has it (tools/setup.sh --tests installs them)
DAEMONS = {"mungekey": "munge", "munged": "munge", "munge": "munge", "unmunge": "munge",
           "slurmctld": "slurmctld", "slurmd": "slurmd"}
CLIENTS = {"srun": "slurm-client", "sbatch": "slurm-client", "sinfo": "slurm-client",
           "squeue": "slurm-client", "scancel": "slurm-client"}
# Slurm's mpi/pmix plugin dlopens the unversioned libpmix.so that only libpmix-dev ships.
LIBRARIES = {"/usr/lib/*/pmix2/lib/libpmix.so": "libpmix-dev",
             "/usr/lib/*/libpmi2.so.0": "libpmi2-0 (Debian 13: libpmi2-0t64)"}
READY_SECONDS = 60  # for munged, then for the node to be idle
STOP_SECONDS = 10  # SIGTERM to SIGKILL


def slurm_conf(d: Path, node: str) -> str:
    """The cluster's slurm.conf (every key as Slurm 22.05's slurm.conf(5) documents it)."""
    return "\n".join([
        "ClusterName=threelc",
        f"SlurmctldHost={node}(127.0.0.1)",
        "SlurmUser=root",
        "SlurmdUser=root",
        f"SlurmctldPort={free_port()}",
        f"SlurmdPort={free_port()}",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"AuthInfo=socket={d}/munge.sock",
        f"StateSaveLocation={d}/state",
        f"SlurmdSpoolDir={d}/spool",
        f"SlurmctldPidFile={d}/slurmctld.pid",
        f"SlurmdPidFile={d}/slurmd.pid",
        f"SlurmctldLogFile={d}/slurmctld.log",
        f"SlurmdLogFile={d}/slurmd.log",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none",
        "JobCompType=jobcomp/none",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_CPU",
        "SchedulerType=sched/builtin",
        "SlurmdParameters=config_overrides",
        "MpiDefault=pmix",
        "ReturnToService=2",
        "MailProg=/bin/true",
        f"NodeName={node} NodeAddr=127.0.0.1 CPUs=4 State=UNKNOWN",
        f"PartitionName=debug Nodes={node} Default=YES MaxTime=10 State=UP",
        ""])


def tail(path: Path, n: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError as e:
        return f"({e})"


class SlurmCluster:
    def __init__(self, directory: Path, binaries: dict[str, str]):
        self.directory = directory
        self.bin = binaries  # name -> path (srun, sbatch, ... for the tests too)
        self.node = socket.gethostname().split(".")[0]
        self.env = {**os.environ, "SLURM_CONF": str(directory / "slurm.conf")}
        self.env.pop("LD_PRELOAD", None)  # a sanitizer build's runtime is for the ranks only
        self.daemons: dict[str, subprocess.Popen] = {}

    def logs(self) -> str:
        return "\n".join(f"--- {name} ---\n{tail(self.directory / name)}"
                         for name in ("munged.out", "slurmctld.out", "slurmctld.log",
                                      "slurmd.out", "slurmd.log"))

    def fail(self, what: str) -> None:
        pytest.fail(f"Slurm test cluster in {self.directory}: {what}\n{self.logs()}",
                    pytrace=False)

    def spawn(self, name: str, command: list[str]) -> None:
        with open(self.directory / f"{name}.out", "w") as out:
            self.daemons[name] = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT,
                                                  stdin=subprocess.DEVNULL, env=self.env,
                                                  cwd=self.directory, start_new_session=True)

    def wait_until(self, what: str, ready) -> None:
        deadline = time.monotonic() + READY_SECONDS
        while not ready():
            for name, proc in self.daemons.items():
                if proc.poll() is not None:
                    self.fail(f"{name} exited with status {proc.returncode} while waiting "
                              f"for {what}")
            if time.monotonic() > deadline:
                self.fail(f"no {what} after {READY_SECONDS} s")
            time.sleep(0.2)

    def run(self, *command: str, timeout: float = 10) -> subprocess.CompletedProcess:
        try:
            return subprocess.run(command, capture_output=True, text=True, env=self.env,
                                  timeout=timeout, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            return subprocess.CompletedProcess(command, -1, "", f"timed out after {timeout} s")

    def munge_works(self) -> bool:
        sock = str(self.directory / "munge.sock")
        munge, unmunge = self.bin["munge"], self.bin["unmunge"]
        return self.run("sh", "-c", f'"{munge}" -n -S "{sock}" | "{unmunge}" -S "{sock}"'
                        ).returncode == 0

    def node_state(self) -> str:
        return self.run(self.bin["sinfo"], "-h", "-n", self.node, "-o", "%t").stdout.strip()

    def start(self) -> None:
        d = self.directory
        (d / "state").mkdir()
        (d / "spool").mkdir()
        (d / "slurm.conf").write_text(slurm_conf(d, self.node))
        (d / "cgroup.conf").write_text("CgroupPlugin=cgroup/v1\n")
        key = self.run(self.bin["mungekey"], "-c", "-k", str(d / "munge.key"))
        if key.returncode != 0:
            self.fail(f"mungekey failed: {key.stderr.strip()}")
        self.spawn("munged", [self.bin["munged"], "-F", "-f", "--key-file", str(d / "munge.key"),
                              "-S", str(d / "munge.sock"), "--pid-file", str(d / "munged.pid"),
                              "--log-file", str(d / "munged.log"),
                              "--seed-file", str(d / "munged.seed"), "--num-threads", "2"])
        self.wait_until("munged answering on its socket", self.munge_works)
        self.spawn("slurmctld", [self.bin["slurmctld"], "-D", "-c", "-i"])
        self.spawn("slurmd", [self.bin["slurmd"], "-D", "-N", self.node])
        self.wait_until(f"node {self.node} idle in sinfo", lambda: self.node_state() == "idle")

    def stop(self) -> None:
        if "slurmctld" in self.daemons and self.daemons["slurmctld"].poll() is None:
            # jobs that have not ended (a completing one needs nothing more)
            queue = [self.bin["squeue"], "-h", "-t", "PD,CF,R,S", "-o", "%i"]
            jobs = self.run(*queue).stdout.split()
            if jobs:
                self.run(self.bin["scancel"], *jobs)
                deadline = time.monotonic() + STOP_SECONDS
                while self.run(*queue).stdout.strip() and time.monotonic() < deadline:
                    time.sleep(0.2)
        for name in ("slurmd", "slurmctld", "munged"):
            proc = self.daemons.get(name)
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_SECONDS
        for proc in self.daemons.values():
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@pytest.fixture(scope="module")
def slurm_cluster():
    binaries = require({**DAEMONS, **CLIENTS}, LIBRARIES,
                       needs_root="the test cluster's daemons run as root")
    d = Path(tempfile.mkdtemp(prefix="threelc-slurm-"))
    os.chmod(d, 0o700)
    cluster = SlurmCluster(d, binaries)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(d, ignore_errors=True)
