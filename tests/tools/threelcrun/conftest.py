"""Fixtures for the threelcrun tests: the launcher, a rank environment, a throwaway sshd."""

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LAUNCHER = REPO / "tools" / "threelcrun"
HELPER = Path(__file__).resolve().parent / "rank_helper.py"
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
SSHD = "/usr/sbin/sshd"


def library_available():
    if os.environ.get("THREELC_LIBRARY"):
        return os.path.isfile(os.environ["THREELC_LIBRARY"])
    return (REPO / "build" / "lib" / "libthreelc.so").is_file()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pid_gone(pid):
    """True when pid no longer runs (absent, or a zombie waiting for a parent to reap it)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state in ("Z", "X")


def wait_for(predicate, timeout, interval=0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()


def read_pids(directory):
    pids = {}
    for p in Path(directory).glob("*.pid"):
        text = p.read_text().strip()
        if text:
            pids[p.name] = int(text)
    return pids


@pytest.fixture
def run_env():
    """Environment for threelcrun: bytecode off, and no PYTHONPATH tricks of the caller."""
    env = dict(os.environ)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.pop("THREELC_SSH_PORT", None)
    env.pop("OMP_NUM_THREADS", None)  # threelcrun sets it for ranks sharing a host
    return env


def launch(args, env, cwd=None, timeout=60, **kwargs):
    return subprocess.run([PYTHON, str(LAUNCHER)] + [str(a) for a in args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=timeout, **kwargs)


class Sshd:
    def __init__(self, directory):
        self.dir = Path(directory)
        self.port = None
        self.key = self.dir / "userkey"
        self.proc = None

    def ssh_args(self):
        return ["--ssh-port", self.port, "--ssh-identity", self.key,
                "--ssh-option", f"UserKnownHostsFile={self.dir / 'known_hosts'}",
                "--ssh-option", "StrictHostKeyChecking=no",
                "--ssh-option", "LogLevel=ERROR",
                "--ssh-option", "IdentitiesOnly=yes"]

    def start(self):
        d = self.dir
        for name in ("hostkey", "userkey"):
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / name)],
                           check=True, capture_output=True)
        shutil.copy(d / "userkey.pub", d / "authorized_keys")
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
        last = ""
        for _ in range(3):  # the port could be taken between choosing and binding it
            self.port = free_port()
            (d / "sshd_config").write_text(
                f"Port {self.port}\nListenAddress 127.0.0.1\nHostKey {d / 'hostkey'}\n"
                f"AuthorizedKeysFile {d / 'authorized_keys'}\nPidFile {d / 'sshd.pid'}\n"
                "UsePAM no\nStrictModes no\nPermitRootLogin prohibit-password\n"
                "PasswordAuthentication no\nKbdInteractiveAuthentication no\n"
                "PubkeyAuthentication yes\nPrintMotd no\nPrintLastLog no\n"
                "AllowTcpForwarding no\nX11Forwarding no\n")
            log = open(d / "sshd.log", "w")
            self.proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(d / "sshd_config")],
                                         stdout=log, stderr=subprocess.STDOUT)
            if wait_for(self._accepts, 5):
                return
            self.stop()
            last = (d / "sshd.log").read_text()
        raise RuntimeError(f"sshd did not start: {last}")

    def _accepts(self):
        if self.proc.poll() is not None:
            return False
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                return True
        except OSError:
            return False

    def check_login(self):
        r = subprocess.run(["ssh", "-T", "-o", "BatchMode=yes", "-p", str(self.port), "-i",
                            str(self.key), "-o", f"UserKnownHostsFile={self.dir / 'known_hosts'}",
                            "-o", "StrictHostKeyChecking=no", "-o", "LogLevel=ERROR",
                            "-o", "IdentitiesOnly=yes", "127.0.0.1", "echo ok"],
                           capture_output=True, text=True, timeout=20, stdin=subprocess.DEVNULL)
        return r.returncode == 0 and r.stdout.strip() == "ok", r.stderr

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture(scope="session")
def sshd():
    if not os.path.exists(SSHD):
        pytest.skip(f"{SSHD} is missing (Debian package openssh-server)")
    if not shutil.which("ssh") or not shutil.which("ssh-keygen"):
        pytest.skip("ssh or ssh-keygen is missing (Debian package openssh-client)")
    with tempfile.TemporaryDirectory(prefix="threelcrun-sshd-") as d:
        os.chmod(d, 0o700)
        server = Sshd(d)
        try:
            server.start()
        except (RuntimeError, OSError) as e:
            pytest.skip(f"cannot start a test sshd: {e}")
        try:
            ok, err = server.check_login()
            if not ok:
                pytest.skip(f"cannot log in to the test sshd as this user: {err.strip()}")
            yield server
        finally:
            server.stop()


# The launcher's own behaviour (environment, output, signals, ssh) does not depend on the
# transport: ctest's launcher_tests_ucx (THREELC_TRANSPORT=ucx, see tests/CMakeLists.txt) runs
# only the jobs that move data, test_transport_jobs.py. test_launcher.py also checks that
# THREELC_TRANSPORT is unset in a rank's environment unless --transport is given.
LAUNCHER_ONLY = ("test_launcher.py", "test_ssh.py")


def pytest_collection_modifyitems(config, items):
    transport = os.environ.get("THREELC_TRANSPORT", "tcp")
    if transport == "tcp":
        return
    skip = pytest.mark.skip(reason=f"launcher-only test: run by launcher_tests (tcp), not "
                                   f"under THREELC_TRANSPORT={transport}")
    for item in items:
        if item.fspath.basename in LAUNCHER_ONLY:
            item.add_marker(skip)
