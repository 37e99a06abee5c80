"""Jobs of rank processes, the one way every suite starts them and reads what they printed.

A job is one command that starts all its ranks: tools/threelcrun (``threelcrun()`` builds its
command line), torchrun, tools/eval/emulate_cluster. ``run_job()`` runs it to its end within a
bounded wait and returns a ``RankJob``: exit code, stdout and stderr, seconds, and each rank's
stdout lines without their ``[rank] `` prefix (threelcrun's; a torchrun job, where only rank 0
prints, has every line as rank 0's; ``JobOptions.prefix`` reads srun's or mpirun's instead).
``start_job()`` starts one for a test that signals the launcher or reads its output while it
runs; ``RunningJob.wait()`` ends it the same way.

A job that runs past its time is killed (its whole session: the launcher and whatever it
started in its own process group; threelcrun's watchdog stops the ranks it put in groups of
their own) and fails the test with a message that names the ranks that had not printed their
last line (``JobOptions.done``) and each rank's last line, then the output's tails.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import signal
import subprocess
import time
from collections import defaultdict
from pathlib import Path
from typing import Optional, Sequence

import pytest

from support.paths import PYTHON, THREELCRUN
from support.sanitized_ranks import TIMEOUT_SCALE

# The prefix before each piece of a rank's stdout, the rank its group 1: threelcrun's "[rank] "
# and srun -l's "rank: " begin lines; mpirun --tag-output writes "[jobid,rank]<stdout>:" before
# every piece it reads from a rank, which may be part of a line (a rank that writes a line in
# several writes, as Python's print does unbuffered), and before each line in such a piece.
THREELCRUN_PREFIX = r"^\[(\d+)\] "
SRUN_PREFIX = r"^ *(\d+): "
MPIRUN_PREFIX = r"\[\d+,(\d+)\]<stdout>:"


@dataclasses.dataclass
class JobOptions:
    """How to run a job. `timeout` is multiplied by the sanitizer builds' TIMEOUT_SCALE unless
    `scale_timeout` is False."""
    env: Optional[dict] = None  # the job's whole environment (None: this process's)
    cwd: Optional[Path | str] = None
    timeout: float = 120.0  # seconds
    scale_timeout: bool = True
    name: Optional[str] = None  # how messages name the job (default: its command line)
    ranks: Optional[int] = None  # how many ranks it has, where the messages should name them
    done: Optional[str] = None  # the start of the line each rank prints last
    prefixed: bool = True  # stdout lines carry a rank's prefix (False: all lines rank 0's)
    prefix: str = THREELCRUN_PREFIX  # that prefix, a regular expression (see above)


def tail(text: str, n: int = 60) -> str:
    return "\n".join(text.splitlines()[-n:])


def rank_lines(stdout: str, prefixed: bool = True,
               prefix: str = THREELCRUN_PREFIX) -> dict[int, list[str]]:
    """rank -> its stdout lines, without the prefix; lines of no rank are left out. A rank's
    pieces (the text from one prefix to the next, up to its first newline) are joined in order
    before they are cut into lines."""
    lines = defaultdict(list)
    if not prefixed:
        lines[0] = stdout.splitlines()
        return lines
    text = defaultdict(str)
    matches = list(re.finditer(prefix, stdout, re.MULTILINE))
    for m, following in zip(matches, matches[1:] + [None]):
        piece = stdout[m.end():following.start() if following else len(stdout)]
        newline = piece.find("\n")
        text[int(m.group(1))] += piece if newline < 0 else piece[:newline + 1]
    for rank, joined in text.items():
        lines[rank] = joined.splitlines()
    return lines


class RankJob:
    """A job that has ended: what it printed and how it ended."""

    def __init__(self, command: Sequence[str], options: JobOptions, returncode: int, stdout: str,
                 stderr: str, seconds: float):
        self.command = [str(c) for c in command]
        self.options = options
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr
        self.seconds = seconds
        self.lines = rank_lines(stdout, options.prefixed, options.prefix)  # rank -> lines

    @property
    def name(self) -> str:
        return self.options.name or " ".join(self.command)

    @property
    def np(self) -> Optional[int]:
        return self.options.ranks

    def hashes(self) -> dict[int, list[str]]:
        """rank -> its HASH lines: results that must be bitwise identical on every rank (the
        workers print ``HASH <key> <digest>``)."""
        return self.prefixed("HASH ")

    def prefixed(self, prefix: str, ranks: Optional[int] = None) -> dict[int, list[str]]:
        """rank -> its lines that start with `prefix`, for every rank of the job."""
        n = ranks if ranks is not None else self.options.ranks
        return {r: [l for l in self.lines[r] if l.startswith(prefix)]
                for r in (range(n) if n is not None else sorted(self.lines))}

    def json_result(self, rank: int = 0) -> dict:
        """The JSON object of a rank's last line (the examples end with their summary)."""
        assert self.lines[rank], f"rank {rank} printed nothing\n{self.describe()}"
        return json.loads(self.lines[rank][-1])

    def unfinished(self) -> list[int]:
        """Ranks without their last line (options.done); [] when the job names no such line."""
        done, n = self.options.done, self.options.ranks
        if done is None or n is None:
            return []
        return [r for r in range(n) if not any(l.startswith(done) for l in self.lines[r])]

    def __repr__(self) -> str:
        return self.describe()

    def describe(self, lines: int = 60) -> str:
        return (f"{self.name}: exit {self.returncode} after {self.seconds:.1f} s\n"
                f"--- stdout ---\n{tail(self.stdout, lines)}\n"
                f"--- stderr ---\n{tail(self.stderr, lines)}")


class RunningJob:
    """A job started by start_job(): `proc` is the launcher's Popen (signal it, read its pipes)."""

    def __init__(self, command: Sequence[str], options: JobOptions):
        self.command = [str(c) for c in command]
        self.options = options
        self.started = time.monotonic()
        # A session of its own: a job past its time goes with everything in the launcher's
        # process group (torchrun's ranks too).
        self.proc = subprocess.Popen(self.command, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, env=options.env,
                                     cwd=None if options.cwd is None else str(options.cwd),
                                     start_new_session=True)

    def limit(self, timeout: Optional[float] = None) -> float:
        seconds = self.options.timeout if timeout is None else timeout
        return seconds * TIMEOUT_SCALE if self.options.scale_timeout else seconds

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def wait(self, timeout: Optional[float] = None) -> RankJob:
        """Waits for the job's end (at most `timeout`, else the options'); a job past it is
        killed and fails the test naming the ranks that had not finished."""
        limit = self.limit(timeout)
        hung = False
        try:
            stdout, stderr = self.proc.communicate(timeout=limit)
        except subprocess.TimeoutExpired:
            hung = True
        except BaseException:  # an interrupted test takes its job with it
            self.kill()
            self.proc.wait()
            raise
        if hung:
            self.kill()
            stdout, stderr = self.proc.communicate()
            pytest.fail(hung_message(self.ended(stdout, stderr), limit), pytrace=False)
        return self.ended(stdout, stderr)

    def ended(self, stdout: str, stderr: str) -> RankJob:
        return RankJob(self.command, self.options, self.proc.returncode, stdout or "",
                       stderr or "", time.monotonic() - self.started)


def hung_message(job: RankJob, limit: float) -> str:
    """What a job past its time is failed with: which ranks had not finished, and where each
    rank was (its last line)."""
    text = f"{job.name} ran past its {limit:g} s and was killed"
    unfinished = job.unfinished()
    if unfinished:
        text += (f"; rank(s) {', '.join(map(str, unfinished))} had not printed "
                 f"{job.options.done!r}")
    last = {r: lines[-1] for r, lines in sorted(job.lines.items()) if lines}
    if last:
        text += "\nlast line of each rank:\n" + "\n".join(f"  [{r}] {l}" for r, l in last.items())
    return (f"{text}\n--- stdout ---\n{job.stdout[-4000:]}\n"
            f"--- stderr ---\n{job.stderr[-4000:]}")


def start_job(command: Sequence[str], options: Optional[JobOptions] = None) -> RunningJob:
    return RunningJob(command, options or JobOptions())


def run_job(command: Sequence[str], options: Optional[JobOptions] = None) -> RankJob:
    """Runs a job to its end (see the module's description)."""
    return start_job(command, options).wait()


def threelcrun(np_: int, command: Sequence[str], launcher_args: Sequence[str] = ()) -> list[str]:
    """The command line of a threelcrun job of `np_` ranks running `command`."""
    return [PYTHON, str(THREELCRUN), "-np", str(np_), *map(str, launcher_args),
            *map(str, command)]
