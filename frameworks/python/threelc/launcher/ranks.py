"""One rank's process (local, or the ssh client of a remote one), its output prefixed with
"[rank] ", and how its exit is described."""

import os
import signal
import sys
import threading

from . import PROG


class Output:
    """Writes whole lines, prefixed, to stdout or stderr, one writer at a time."""

    def __init__(self):
        self.lock = threading.Lock()
        self.broken = {1: False, 2: False}

    def write(self, fd, data):
        with self.lock:
            if self.broken[fd]:
                return
            stream = sys.stdout.buffer if fd == 1 else sys.stderr.buffer
            try:
                stream.write(data)
                stream.flush()
            except (BrokenPipeError, ValueError, OSError):
                self.broken[fd] = True

    def message(self, text):
        self.write(2, f"{PROG}: {text}\n".encode())


def pump(pipe, fd, prefix, output):
    try:
        for line in iter(pipe.readline, b""):
            if not line.endswith(b"\n"):
                line += b"\n"
            output.write(fd, prefix + line)
    except (OSError, ValueError):
        pass
    finally:
        try:
            pipe.close()
        except OSError:
            pass


def describe_status(code):
    if code < 0:
        sig = -code
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = f"signal {sig}"
        return f"was killed by signal {sig} ({name})", 128 + sig
    return f"exited with code {code}", code


class Rank:
    def __init__(self, placement, popen, output):
        self.rank = placement["rank"]
        self.host = placement["host"]
        self.local = placement["local"]
        self.popen = popen
        self.pid = popen.pid
        self.returncode = None
        self.threads = []
        prefix = f"[{self.rank}] ".encode()
        for pipe, fd in ((popen.stdout, 1), (popen.stderr, 2)):
            t = threading.Thread(target=pump, args=(pipe, fd, prefix, output), daemon=True)
            t.start()
            self.threads.append(t)

    def where(self):
        return f"pid {self.pid} on {self.host}" if self.local else \
            f"ssh pid {self.pid} to {self.host}"

    def signal_group(self, sig):
        if self.local:
            try:
                os.killpg(self.pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
        elif self.returncode is None:
            try:
                self.popen.send_signal(sig)
            except (ProcessLookupError, OSError):
                pass

    def terminate(self):
        """First stop step: SIGTERM to a local rank's group; EOF on an ssh rank's stdin."""
        if self.local:
            self.signal_group(signal.SIGTERM)
        else:
            try:
                self.popen.stdin.close()
            except (OSError, ValueError):
                pass
