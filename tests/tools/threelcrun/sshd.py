"""A throwaway sshd on a loopback port (127.0.0.1, and ::1 where that is up), logging in as
this user with a key of its own."""

import os
import shutil
import socket
import subprocess
from pathlib import Path

from launcher_jobs import wait_for

SSHD = "/usr/sbin/sshd"


def ipv6_loopback_up():
    """Whether ::1 is configured here (a socket can bind it)."""
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
            return True
    except OSError:
        return False


def free_port(ipv6):
    """A port free on 127.0.0.1 (and on ::1 with ipv6)."""
    for _ in range(20):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if not ipv6:
            return port
        try:
            with socket.socket(socket.AF_INET6) as s:
                s.bind(("::1", port))
                return port
        except OSError:
            continue
    raise RuntimeError("no port free on both 127.0.0.1 and ::1")


class Sshd:
    def __init__(self, directory):
        self.dir = Path(directory)
        self.port = None
        self.key = self.dir / "userkey"
        self.proc = None
        self.ipv6 = ipv6_loopback_up()  # then it listens on ::1 too

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
            self.port = free_port(self.ipv6)
            listen = "ListenAddress 127.0.0.1\n" + ("ListenAddress ::1\n" if self.ipv6 else "")
            (d / "sshd_config").write_text(
                f"Port {self.port}\n{listen}HostKey {d / 'hostkey'}\n"
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
            for address in ["127.0.0.1"] + (["::1"] if self.ipv6 else []):
                with socket.create_connection((address, self.port), timeout=0.5):
                    pass
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
