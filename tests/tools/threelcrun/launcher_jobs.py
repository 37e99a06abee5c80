"""What the threelcrun tests share: starting the launcher, the ranks' helper, and watching the
processes a job leaves behind."""

import time
from pathlib import Path

from support.paths import PYTHON, THREELCRUN
from support.rank_jobs import JobOptions, run_job

HELPER = Path(__file__).resolve().parent / "rank_helper.py"


def launch(args, env, cwd=None, timeout=60):
    """threelcrun with `args`, run to its end (a RankJob: returncode, stdout, stderr)."""
    return run_job([PYTHON, THREELCRUN, *args],
                   JobOptions(env=env, cwd=cwd, timeout=timeout, scale_timeout=False))


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
