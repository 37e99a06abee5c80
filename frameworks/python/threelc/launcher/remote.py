"""The ssh command line of a rank on another host, and the shell that supervises it there."""

import shlex


# The remote supervisor, run as `sh -c SUPERVISOR threelc-rank GRACE cmd args...` after the
# secret has been read from stdin. fd 3 keeps ssh's stdin for the watcher (an asynchronous
# list's own stdin is /dev/null in a shell without job control). The rank runs in its own
# session (setsid, when present) so the watcher can signal its whole process group; when
# ssh's stdin reaches EOF the watcher sends SIGTERM, then SIGKILL after GRACE seconds. When
# the rank exits first, the supervisor kills the watcher, sends SIGTERM to what is left of the
# rank's process group (leftover children would keep the ssh session open) and exits with the
# rank's status.
SUPERVISOR = (
    'grace=$1; shift; exec 3<&0; '
    'if command -v setsid >/dev/null 2>&1; then setsid "$@" 3<&- & else "$@" 3<&- & fi; '
    'pid=$!; '
    '( cat <&3 >/dev/null 2>&1; '
    'kill -TERM -$pid 2>/dev/null || kill -TERM $pid 2>/dev/null; '
    'sleep $grace; '
    'kill -KILL -$pid 2>/dev/null || kill -KILL $pid 2>/dev/null ) >/dev/null 2>&1 & '
    'watcher=$!; exec 3<&-; '
    'wait $pid; rc=$?; kill $watcher 2>/dev/null; kill -TERM -$pid 2>/dev/null; exit $rc'
)


def remote_command(env, command, cwd, grace, pythonpath_dir=None):
    """The command line ssh runs on the remote host; env must not hold the secret.
    pythonpath_dir, when given, is prepended to the remote PYTHONPATH."""
    assignments = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(env.items()))
    pythonpath = ""
    if pythonpath_dir:
        pythonpath = (f'export PYTHONPATH={shlex.quote(pythonpath_dir)}'
                      '"${PYTHONPATH:+:$PYTHONPATH}" && ')
    grace_text = str(int(grace)) if float(grace).is_integer() else str(grace)
    return (f"cd {shlex.quote(cwd)} && read -r THREELC_SECRET && export THREELC_SECRET && "
            f"{pythonpath}exec env {assignments} sh -c {shlex.quote(SUPERVISOR)} "
            f"threelc-rank {shlex.quote(grace_text)} "
            + " ".join(shlex.quote(a) for a in command))


def ssh_argv(args, host, remote):
    """host as ssh takes it: a name, or an IPv6 address without brackets (`ssh ::1`)."""
    argv = ["ssh", "-T", "-o", "BatchMode=yes"]
    for opt in args.ssh_option:
        argv += ["-o", opt]
    argv += ["-o", "StrictHostKeyChecking=accept-new"]
    if args.ssh_port is not None:
        argv += ["-p", str(args.ssh_port)]
    if args.ssh_identity:
        argv += ["-i", args.ssh_identity]
    argv += [host, remote]
    return argv
