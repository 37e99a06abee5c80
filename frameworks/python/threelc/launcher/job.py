"""The job: starts every rank, watches them, and stops them all when one fails or on a signal."""

import os
import queue
import signal
import subprocess
import sys
import threading
import time

from .environment import checkout_python_dir, job_env, rank_env
from .ranks import Output, Rank, describe_status
from .remote import remote_command, ssh_argv
from .watchdog import WATCHDOG, death_signal_preexec

# The ranks' PYTHONPATH starts with it when this launcher runs from a checkout; None when
# threelc is installed.
PYTHON_PACKAGE_DIR = checkout_python_dir()


class Launcher:
    def __init__(self, args):
        self.args = args
        self.output = Output()
        self.ranks = []
        self.exits = queue.Queue()
        self.signal_received = None
        self.signal_count = 0
        self.watchdog = None

    def on_signal(self, signum, frame):
        self.signal_count += 1
        if self.signal_received is None:
            self.signal_received = signum

    def start_watchdog(self):
        """A process that stops the local ranks' process groups if threelcrun dies."""
        try:
            self.watchdog = subprocess.Popen(
                [sys.executable, "-c", WATCHDOG, str(self.args.grace)], stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL, start_new_session=True)
        except OSError:
            self.watchdog = None

    def tell_watchdog(self, line):
        if self.watchdog is not None:
            try:
                self.watchdog.stdin.write(line.encode() + b"\n")
                self.watchdog.stdin.flush()
            except (OSError, ValueError):
                pass

    def stop_watchdog(self):
        if self.watchdog is not None:
            self.tell_watchdog("exit")
            try:
                self.watchdog.stdin.close()
                self.watchdog.wait(timeout=5)
            except (OSError, ValueError, subprocess.TimeoutExpired):
                pass

    def start(self):
        args = self.args
        job = job_env(args)
        cwd = os.getcwd()
        preexec = death_signal_preexec()
        self.start_watchdog()
        for placement in args.placements:
            env = rank_env(job, placement)
            for name, value in args.extra_env.items():
                env[name] = value
            if placement["local"]:
                full = dict(os.environ)
                full.update(env)
                if PYTHON_PACKAGE_DIR:
                    old = full.get("PYTHONPATH")
                    full["PYTHONPATH"] = PYTHON_PACKAGE_DIR + (os.pathsep + old if old else "")
                popen = subprocess.Popen(
                    args.command, env=full, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE, start_new_session=True, preexec_fn=preexec)
            else:
                forwarded = {k: v for k, v in os.environ.items()
                             if k.startswith("THREELC_") and not k.startswith("THREELC_SSH_")
                             and not k.startswith("THREELC_RUN_")}
                forwarded.update(env)
                secret = forwarded.pop("THREELC_SECRET")
                forwarded.pop("PYTHONPATH", None)
                remote = remote_command(forwarded, args.command, cwd, args.grace,
                                        PYTHON_PACKAGE_DIR)
                popen = subprocess.Popen(
                    ssh_argv(args, placement["host"], remote), stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
                try:
                    popen.stdin.write(secret.encode() + b"\n")
                    popen.stdin.flush()
                except OSError:
                    pass  # ssh already died: its exit status reports it
            if placement["local"]:
                self.tell_watchdog(str(popen.pid))
            rank = Rank(placement, popen, self.output)
            self.ranks.append(rank)
            threading.Thread(target=self._wait, args=(rank,), daemon=True).start()

    def _wait(self, rank):
        code = rank.popen.wait()
        if rank.local:
            # what is left of the rank's process group ends with the rank
            rank.signal_group(signal.SIGTERM)
        self.exits.put((rank, code))

    def _running(self):
        return [r for r in self.ranks if r.returncode is None]

    def _collect(self, timeout):
        try:
            rank, code = self.exits.get(timeout=timeout)
        except queue.Empty:
            return None
        rank.returncode = code
        return rank

    def stop_all(self):
        """SIGTERM (EOF for ssh ranks), then SIGKILL after the grace period; reap all."""
        for r in self.ranks:
            r.terminate()
        deadline = time.monotonic() + self.args.grace
        kill_count = self.signal_count
        # ssh ranks: the remote supervisor escalates after the grace period itself; give it
        # a moment more before killing the ssh client.
        while self._running():
            now = time.monotonic()
            if now >= deadline or self.signal_count > kill_count:
                break
            self._collect(min(0.1, deadline - now))
        if self._running():
            names = ", ".join(str(r.rank) for r in self._running())
            self.output.message(f"rank(s) {names} still running {self.args.grace:g} s after "
                                f"SIGTERM; sending SIGKILL")
            for r in self.ranks:
                if r.local:
                    r.signal_group(signal.SIGKILL)
            remote_deadline = time.monotonic() + 2.0
            while any(not r.local for r in self._running()) and time.monotonic() < remote_deadline:
                self._collect(0.1)
            for r in self._running():
                r.signal_group(signal.SIGKILL)
        else:
            # the leaders are gone; their leftover children must go too
            for r in self.ranks:
                if r.local:
                    r.signal_group(signal.SIGKILL)
        while self._running():
            self._collect(0.1)

    def wait_for_the_others(self, seconds):
        """After a failure: the other ranks may exit by themselves, each with its own error."""
        deadline = time.monotonic() + seconds
        while self._running() and self.signal_received is None:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            self._collect(min(0.1, left))

    def run(self):
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, self.on_signal)
        try:
            self.start()
        except OSError as e:
            self.output.message(f"cannot start {self.args.command[0]!r}: {e.strerror}; "
                                "stopping the other ranks")
            self.stop_all()
            self.stop_watchdog()
            return 127
        exit_code = 0
        while self._running():
            if self.signal_received is not None:
                sig = self.signal_received
                self.output.message(f"received {signal.Signals(sig).name}; stopping all ranks")
                self.stop_all()
                exit_code = 128 + sig
                break
            rank = self._collect(0.1)
            if rank is None or rank.returncode == 0:
                continue
            text, exit_code = describe_status(rank.returncode)
            hint = ""
            if not rank.local and rank.returncode == 255:
                hint = " (ssh itself failed: connection or authentication?)"
            elif not rank.local and 128 < rank.returncode < 128 + 65:
                try:
                    name = signal.Signals(rank.returncode - 128).name
                except ValueError:
                    name = "?"
                hint = (f" (the remote rank was probably killed by signal "
                        f"{rank.returncode - 128} ({name}))")
            self.output.message(f"rank {rank.rank} ({rank.where()}) {text}{hint}; "
                                f"stopping the other ranks (they have "
                                f"{self.args.failure_wait:g} s to stop on their own)")
            self.wait_for_the_others(self.args.failure_wait)
            self.stop_all()
            break
        self.stop_watchdog()
        for r in self.ranks:
            for t in r.threads:
                t.join(timeout=2.0)
        return exit_code
