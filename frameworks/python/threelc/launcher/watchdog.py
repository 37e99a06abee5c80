"""What stops the local ranks when threelcrun dies without stopping them: the kernel's parent
death signal, and a watchdog process that signals their process groups."""

import os
import signal


def death_signal_preexec():
    """Local ranks get SIGTERM if threelcrun dies without stopping them (Linux only)."""
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        prctl = libc.prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def preexec():
        prctl(1, int(signal.SIGTERM), 0, 0, 0)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:
            os._exit(143)
    return preexec


# Reads process group ids, one a line, until EOF; "exit" means threelcrun ended normally. EOF
# without "exit" means threelcrun died: SIGTERM to every group, SIGKILL after the grace period.
WATCHDOG = '''
import os, signal, sys, time
signal.signal(signal.SIGINT, signal.SIG_IGN)
groups = []
for line in sys.stdin:
    line = line.strip()
    if line == "exit":
        sys.exit(0)
    if line.isdigit():
        groups.append(int(line))
def send(sig):
    for g in groups:
        try:
            os.killpg(g, sig)
        except OSError:
            pass
send(signal.SIGTERM)
time.sleep(float(sys.argv[1]))
send(signal.SIGKILL)
'''
