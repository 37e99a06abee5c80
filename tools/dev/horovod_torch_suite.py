#!/usr/bin/env python3
"""Runs Horovod's own test/parallel/test_torch.py against threelc.torch, one test per job.

A Horovod user switches with `import threelc.torch as hvd`; this tool does the same for
Horovod's unchanged test file. In a temporary folder outside the repository it puts
  shim/horovod/torch/__init__.py   `horovod.torch` *is* threelc.torch (sys.modules alias)
  test/parallel/test_torch.py      the Horovod file, as given
  test/parallel/conftest.py        HOROVOD_RANK / HOROVOD_SIZE from threelcrun's THREELC_*
                                   (the file reads them to know it runs under a gloo launcher)
  test/utils/common.py             the three helpers the file imports from Horovod's
                                   test/utils (written here, not Horovod's)
then runs every selected test as its own job,
  python -m threelc.launcher -np N PYTHON -m pytest -q -x test_torch.py::TorchTests::TEST
(threelcrun, from the package on PYTHONPATH, so launcher and ranks use the same package) with
a wall-clock limit: a job past it is HUNG, and it and its ranks' process groups are killed.
At three quarters of the limit pytest's faulthandler_timeout prints every rank's stacks; a HUNG
line names the line of test_torch.py each silent rank waits in.

Prints one line per test (PASSED / FAILED / SKIPPED / HUNG, seconds, first error: the
exception and message from the rank output, or the skip reason) and a summary line
`N passed, N failed, N hung, N skipped`. Writes to OUT: results.jsonl (one JSON object per
test), logs/TEST.log (the job's whole output, ranks prefixed [r]) and run.json (the run's
settings).

Usage:
  horovod_torch_suite.py SOURCE --out DIR [-np N] [--python PY] [-k PATTERN] [--timeout S]
SOURCE: a Horovod checkout (its test/parallel/test_torch.py), the test file itself, or
git:<dir> (a git dir, bare or not: `git show REV:test/parallel/test_torch.py`; --rev, HEAD).
-k PATTERN is pytest's -k expression, applied by a collection run. PYTHONPATH and
THREELC_LIBRARY are the caller's (PYTHONPATH defaults to this checkout's frameworks/python;
the shim goes before it). Exit status: 0 when every selected test passed or skipped, 1 when
one failed or hung, 2 when the run could not start (bad argument, collection failed).

  tools/dev/horovod_torch_suite.py git:/work/.mirror/horovod+horovod/repo --out /tmp/hvd
  tools/dev/horovod_torch_suite.py ~/horovod -np 3 -k "allreduce and not process_set" --out o
"""

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))
TEST_PATH = "test/parallel/test_torch.py"
TEST_CLASS = "TorchTests"
KILL_WAIT_S = 15  # after SIGTERM to the launcher (its grace is 5 s) before SIGKILL to all

SHIM_TORCH = '''"""`import horovod.torch as hvd` binds threelc.torch itself, as
`import threelc.torch as hvd` would (written by tools/dev/horovod_torch_suite.py)."""
import sys

import threelc.torch

sys.modules[__name__] = threelc.torch
'''

CONFTEST = '''"""Horovod's test reads HOROVOD_RANK / HOROVOD_SIZE, which its gloo launcher sets; threelcrun
sets THREELC_RANK / THREELC_SIZE (written by tools/dev/horovod_torch_suite.py)."""
import os

for _horovod, _threelc in (("HOROVOD_RANK", "THREELC_RANK"), ("HOROVOD_SIZE", "THREELC_SIZE"),
                           ("HOROVOD_LOCAL_RANK", "THREELC_LOCAL_RANK"),
                           ("HOROVOD_LOCAL_SIZE", "THREELC_LOCAL_SIZE")):
    if _threelc in os.environ:
        os.environ[_horovod] = os.environ[_threelc]
'''

COMMON = '''"""The helpers test_torch.py imports from Horovod's test/utils/common.py, with the same
meaning (written by tools/dev/horovod_torch_suite.py)."""
import contextlib
import os
import tempfile


def mpi_env_rank_and_size():
    """(rank, size) from an MPI launcher's variables; (0, 1) outside MPI."""
    for rank_name, size_name in (("PMI_RANK", "PMI_SIZE"),
                                 ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE")):
        if rank_name in os.environ and size_name in os.environ:
            return int(os.environ[rank_name]), int(os.environ[size_name])
    return 0, 1


def skip_or_fail_gpu_test(test, message):
    """A missing GPU fails the test when HOROVOD_TEST_GPU=1, else skips it."""
    if int(os.environ.get("HOROVOD_TEST_GPU", "0")):
        test.fail(message)
    test.skipTest(message)


@contextlib.contextmanager
def temppath():
    """A file name in a fresh temporary folder, removed afterwards."""
    with tempfile.TemporaryDirectory() as folder:
        yield os.path.join(folder, "temp_test_file")
'''


def fail(message):
    print(f"horovod_torch_suite: {message}", file=sys.stderr)
    sys.exit(2)


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="horovod_torch_suite.py",
        description="Horovod's test/parallel/test_torch.py against threelc.torch, one test "
                    "per threelcrun job (see the file's header).")
    p.add_argument("source", help="Horovod checkout, test_torch.py, or git:<git dir>")
    p.add_argument("--out", required=True, help="folder for results.jsonl, logs/, run.json")
    p.add_argument("-np", type=int, default=2, help="ranks per job (default 2)")
    p.add_argument("--python", default=os.path.join(ROOT, "build", "venv-torch2", "bin", "python"),
                   help="the ranks' Python, with torch and pytest (default: this checkout's "
                        "build/venv-torch2/bin/python)")
    p.add_argument("-k", dest="pattern", help="pytest -k expression selecting tests")
    p.add_argument("--timeout", type=float, default=120.0,
                   help="seconds a job may run before it counts as HUNG (default 120)")
    p.add_argument("--rev", default="HEAD", help="revision for git:<dir> (default HEAD)")
    p.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = p.parse_args(argv)
    if args.np < 1:
        p.error(f"-np must be at least 1, got {args.np}")
    if args.timeout <= 0:
        p.error(f"--timeout must be positive, got {args.timeout}")
    if not (os.path.isfile(args.python) and os.access(args.python, os.X_OK)):
        p.error(f"--python {args.python} is not an executable file "
                "(tools/torch2_venv.sh makes the default one)")
    return args


def read_test_file(source, rev):
    """The text of Horovod's test_torch.py, and a description of where it came from."""
    if source.startswith("git:"):
        git_dir = source[len("git:"):]
        if not os.path.isdir(git_dir):
            fail(f"git dir {git_dir!r} (from {source!r}) does not exist")
        spec = f"{rev}:{TEST_PATH}"
        done = subprocess.run(["git", "--git-dir", git_dir, "show", spec], capture_output=True,
                              text=True)
        if done.returncode != 0:
            fail(f"git --git-dir {git_dir} show {spec} failed: {done.stderr.strip()}")
        commit = subprocess.run(["git", "--git-dir", git_dir, "rev-parse", rev],
                                capture_output=True, text=True).stdout.strip()
        return done.stdout, f"{source} {spec} ({commit or 'unknown commit'})"
    path = os.path.join(source, TEST_PATH) if os.path.isdir(source) else source
    if not os.path.isfile(path):
        fail(f"no test file at {path!r} (SOURCE is a Horovod checkout, its {TEST_PATH}, "
             "or git:<git dir>)")
    with open(path, encoding="utf-8") as f:
        return f.read(), os.path.realpath(path)


def inside(path, folder):
    path, folder = os.path.realpath(path), os.path.realpath(folder)
    return path == folder or path.startswith(folder + os.sep)


def make_workspace(text):
    """The temporary folder with the shim, the test file and its helpers; its test folder."""
    tmp = tempfile.mkdtemp(prefix="horovod-torch-suite-")
    if inside(tmp, ROOT):
        shutil.rmtree(tmp)
        fail(f"the temporary folder {tmp} lies inside the repository {ROOT}; set TMPDIR "
             "to a folder outside it")
    files = {
        "shim/horovod/__init__.py": "",
        "shim/horovod/torch/__init__.py": SHIM_TORCH,
        "test/parallel/test_torch.py": text,
        "test/parallel/conftest.py": CONFTEST,
        "test/parallel/pytest.ini": "[pytest]\n",  # the rootdir: no ini above it is read
        "test/utils/common.py": COMMON,
    }
    for rel, content in files.items():
        path = os.path.join(tmp, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(content)
    return tmp, os.path.join(tmp, "test", "parallel")


def job_env(tmp):
    env = dict(os.environ)
    package = env.get("PYTHONPATH") or os.path.join(ROOT, "frameworks", "python")
    env["PYTHONPATH"] = os.path.join(tmp, "shim") + os.pathsep + package
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def collect(python, test_dir, env, pattern):
    """The selected tests' names, from pytest's own collection (so -k means what it means
    to pytest)."""
    command = [python, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
               "test_torch.py"] + (["-k", pattern] if pattern else [])
    done = subprocess.run(command, cwd=test_dir, env=env, capture_output=True, text=True,
                          timeout=300)
    prefix = f"test_torch.py::{TEST_CLASS}::"
    names = [line[len(prefix):] for line in done.stdout.splitlines() if line.startswith(prefix)]
    if done.returncode not in (0, 5) or (not names and done.returncode != 5):
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-25:])
        fail(f"collecting the tests failed (exit {done.returncode}):\n{tail}")
    return names


def test_uses(text):
    """What each test method needs, from its source: process sets, a GPU, Adasum."""
    uses, name, body = {}, None, []
    method = re.compile(r"^    def (test_\w+)\(")

    def close():
        if name:
            src = "\n".join(body)
            uses[name] = [tag for tag, hit in (
                ("process_sets", "process_set" in src),
                ("gpu_only", re.search(r'skip\w*\(self, "No GPUs available"\)|'
                                       r'skipTest\("No GPUs available"\)', src) is not None),
                ("adasum", "Adasum" in src)) if hit]
    for line in text.splitlines():
        m = method.match(line)
        if m or (line and not line.startswith(" ")):
            close()
            name, body = (m.group(1), []) if m else (None, [])
        elif name:
            body.append(line)
    close()
    return uses


def descendants(pid):
    """Every process below pid (by parent links in /proc)."""
    children = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def stop_job(proc):
    """A hung job: SIGTERM to the launcher (it stops its ranks), then SIGKILL to the launcher's
    group and to every process group of a process that was below it."""
    below = descendants(proc.pid)
    groups = set()
    for pid in below:
        try:
            groups.add(os.getpgid(pid))
        except OSError:
            pass
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(KILL_WAIT_S)
    except subprocess.TimeoutExpired:
        pass
    for group in groups | {proc.pid}:
        try:
            os.killpg(group, signal.SIGKILL)
        except OSError:
            pass
    for pid in below:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    proc.wait()


RANK_LINE = re.compile(r"^\[(\d+)\] (.*)$")
SUMMARY = re.compile(r"^=*\s*(\d+ \w+.*) in [\d.]+s")
COUNT = re.compile(r"(\d+) (passed|failed|skipped|errors?|xfailed|xpassed)")
EXCEPTION = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt|Failed|Warning)\b")
SKIP_REASON = re.compile(r"^SKIPPED \[\d+\] [^:]+:\d+: (.*)$")


def rank_outcome(lines):
    """passed / failed / skipped from a rank's pytest summary line; None without one."""
    for line in reversed(lines):
        m = SUMMARY.match(line)
        if m:
            counts = {word.rstrip("s") if word.startswith("error") else word: int(n)
                      for n, word in COUNT.findall(m.group(1))}
            if counts.get("failed") or counts.get("error"):
                return "failed"
            if counts.get("passed") or counts.get("xfailed") or counts.get("xpassed"):
                return "passed"
            if counts.get("skipped"):
                return "skipped"
            return "none"
    return None


def first_error(lines):
    """(index in the rank's lines, text) of the rank's first error: pytest's first `E` line
    naming an exception (else its first `E` line), else a traceback's last line."""
    e_lines = [(i, line[1:].strip()) for i, line in enumerate(lines)
               if line.startswith("E ") and line[1:].strip()]
    for i, text in e_lines:
        if EXCEPTION.match(text):
            return i, text
    if e_lines:
        return e_lines[0]
    for i, line in enumerate(lines):
        if line.startswith("Traceback (most recent call last)"):
            for j in range(i + 1, len(lines)):
                if lines[j] and not lines[j].startswith(" "):
                    return j, lines[j].strip()
    return None


FRAME = re.compile(r'^\s*File "([^"]+)", line (\d+) in (\w+)')


def hang_site(lines, source_lines):
    """Where a rank waits, from the stack dump pytest's faulthandler_timeout printed: the
    innermost frame of test_torch.py (with its source line) and the innermost frame of all,
    in the first thread that runs the test; None without a dump."""
    if not any(line.startswith("Timeout (") for line in lines):
        return None
    start = next(i for i, line in enumerate(lines) if line.startswith("Timeout ("))
    thread = []
    for line in lines[start + 1:] + ["Thread"]:
        if line.startswith(("Thread", "Current thread")) or not line.strip():
            inner = [m for m in thread if m.group(1).endswith("/test_torch.py")]
            if inner:
                number = int(inner[0].group(2))
                code = source_lines[number - 1].strip() if number <= len(source_lines) else ""
                where = f"test_torch.py:{number} `{code}`"
                top = thread[0]
                if top is not inner[0]:
                    where += (f" in {os.path.basename(top.group(1))}:{top.group(2)} "
                              f"{top.group(3)}")
                return where
            thread = []
        else:
            m = FRAME.match(line)
            if m:
                thread.append(m)
    return None


def judge(log_lines, np, returncode, hung, timeout, source_lines=()):
    """status, first error, the rank whose error it is, and each rank's outcome."""
    ranks = {r: [] for r in range(np)}
    order = {r: [] for r in range(np)}  # the merged log's index of each rank line
    launcher = []
    for index, line in enumerate(log_lines):
        m = RANK_LINE.match(line)
        if m and int(m.group(1)) in ranks:
            ranks[int(m.group(1))].append(m.group(2))
            order[int(m.group(1))].append(index)
        else:
            launcher.append(line)
    outcomes = {r: rank_outcome(ranks[r]) for r in range(np)}
    # The error printed first in the merged log: a rank failing on its own prints before the
    # ranks that fail because of it.
    errors = {r: first_error(ranks[r]) for r in range(np)}
    candidates = sorted((order[r][e[0]], r, e[1]) for r, e in errors.items()
                        if e and outcomes[r] != "passed" and outcomes[r] != "skipped")
    error_rank, error = (candidates[0][1], candidates[0][2]) if candidates else (None, "")
    values = set(outcomes.values())
    if hung:
        silent = [r for r in range(np) if outcomes[r] is None]
        sites = [f"rank {r} at {site}" for r in silent
                 for site in [hang_site(ranks[r], source_lines)] if site]
        last = next((f"last line [{r}] {ranks[r][-1]}" for r in silent if ranks[r]),
                    "no output")
        status = "HUNG"
        error = error or (f"no result from ranks {silent} after {timeout:g} s; "
                          + ("; ".join(sites) if sites else last))
    elif values == {"skipped"}:
        status = "SKIPPED"
        reasons = [SKIP_REASON.match(line) for line in ranks[0]]
        error = next((m.group(1) for m in reasons if m), "")
    elif values == {"passed"} and returncode == 0:
        status, error = "PASSED", ""
    else:
        status = "FAILED"
        if not error:
            if values <= {"passed", "skipped", "none"} and None not in values:
                error = (f"ranks disagree: {outcomes}" if len(values) > 1 else
                         f"exit status {returncode} after pytest finished")
            else:
                said = [line for line in launcher if line.strip()]  # the launcher's first word
                error = said[0] if said else f"no result from ranks, exit status {returncode}"
    return status, error, error_rank, outcomes


def hang_dump_s(timeout):
    """When pytest's faulthandler dumps every thread's stack of a test still running: well
    before the job's limit, which also covers the ranks' start (torch's import)."""
    return max(1, int(timeout * 0.75))


def run_test(args, name, test_dir, env, log_path, source_lines):
    command = [sys.executable, "-m", "threelc.launcher", "-np", str(args.np),
               args.python, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-rfEs",
               "--tb=short", "-o", f"faulthandler_timeout={hang_dump_s(args.timeout)}",
               f"test_torch.py::{TEST_CLASS}::{name}"]
    start = time.monotonic()
    with open(log_path, "w", encoding="utf-8") as log:
        log.write("$ " + " ".join(command) + "\n")
        log.flush()
        proc = subprocess.Popen(command, cwd=test_dir, env=env, stdin=subprocess.DEVNULL,
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        hung = False
        try:
            proc.wait(args.timeout)
        except subprocess.TimeoutExpired:
            hung = True
            stop_job(proc)
    seconds = time.monotonic() - start
    with open(log_path, encoding="utf-8", errors="replace") as f:
        lines = f.read().splitlines()[1:]
    status, error, error_rank, outcomes = judge(lines, args.np, proc.returncode, hung,
                                                args.timeout, source_lines)
    return {"test": name, "status": status, "seconds": round(seconds, 1), "error": error,
            "error_rank": error_rank, "ranks": {str(r): o for r, o in outcomes.items()},
            "exit_status": proc.returncode, "np": args.np}


def torch_version(python, env):
    done = subprocess.run([python, "-c", "import torch; print(torch.__version__)"], env=env,
                          capture_output=True, text=True)
    return done.stdout.strip() or "unknown"


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    text, origin = read_test_file(args.source, args.rev)
    if f"class {TEST_CLASS}(" not in text:
        fail(f"{origin} has no class {TEST_CLASS}: not Horovod's test_torch.py?")
    os.makedirs(os.path.join(args.out, "logs"), exist_ok=True)
    tmp, test_dir = make_workspace(text)
    try:
        env = job_env(tmp)
        names = collect(args.python, test_dir, env, args.pattern)
        uses = test_uses(text)
        run = {"source": origin, "np": args.np, "python": args.python,
               "torch": torch_version(args.python, env), "pattern": args.pattern,
               "timeout_s": args.timeout, "tests": len(names),
               "PYTHONPATH": env["PYTHONPATH"], "THREELC_LIBRARY": env.get("THREELC_LIBRARY"),
               "started": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        with open(os.path.join(args.out, "run.json"), "w", encoding="utf-8") as f:
            json.dump(run, f, indent=1)
        print(f"horovod_torch_suite: {len(names)} tests of {origin}, {args.np} ranks, "
              f"torch {run['torch']}, {args.timeout:g} s per job", flush=True)
        counts = {"PASSED": 0, "FAILED": 0, "HUNG": 0, "SKIPPED": 0}
        started = time.monotonic()
        with open(os.path.join(args.out, "results.jsonl"), "w", encoding="utf-8") as results:
            for name in names:
                log_rel = os.path.join("logs", f"{name}.log")
                result = run_test(args, name, test_dir, env, os.path.join(args.out, log_rel),
                                  text.splitlines())
                result["uses"] = uses.get(name, [])
                result["log"] = log_rel
                results.write(json.dumps(result) + "\n")
                results.flush()
                counts[result["status"]] += 1
                print(f"{result['status']:<7} {result['seconds']:6.1f}s  {name}"
                      + (f"  {result['error']}" if result["error"] else ""), flush=True)
        print(f"{counts['PASSED']} passed, {counts['FAILED']} failed, {counts['HUNG']} hung, "
              f"{counts['SKIPPED']} skipped ({time.monotonic() - started:.0f} s; results in "
              f"{os.path.join(args.out, 'results.jsonl')})", flush=True)
        return 0 if counts["FAILED"] == counts["HUNG"] == 0 else 1
    finally:
        if args.keep:
            print(f"horovod_torch_suite: kept {tmp}", file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
