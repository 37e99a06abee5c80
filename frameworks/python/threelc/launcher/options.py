"""threelcrun's command line: the parser, its help, and the checks of every option."""

import argparse
import os
import sys

from . import PROG
from .hosts import UsageError, assign_ranks, merge_hosts, parse_host_list, parse_hostfile
from .settings import SETTINGS

DESCRIPTION = """\
Start N ranks of a threelc job: local processes on this machine, ssh for other hosts.
Each rank gets its rank/size variables, the coordinator's address and a fresh secret
(which authenticates every connection of the job); every line it prints is prefixed
with "[rank] "; when one rank fails the others are stopped."""

EPILOG = """\
hosts:
  Without -H/--hostfile all ranks run here (localhost:N). Ranks fill the hosts in order:
  the first host's slots first. A host is a name, an IPv4 address or an IPv6 address;
  without a slot count it has 1 slot.
    -H entries (comma-separated): host, host:K, [v6-address], [v6-address]:K. An IPv6
      address takes brackets in -H: -H ::1:2 is refused (write [::1]:2, 2 slots on ::1).
    hostfile lines: host, host:K, host slots=K, [v6-address], [v6-address]:K,
      [v6-address] slots=K, and a bare IPv6 address alone or with slots=K (::1 slots=2);
      "#" starts a comment. Open MPI's max_slots=M is accepted beside a slot count and
      checked (M >= K), and changes nothing: threelcrun puts at most K ranks on a host.
  ssh is given the address without brackets (ssh ::1). A host runs its ranks as local
  processes only when its name is exactly "localhost" or this machine's hostname
  (socket.gethostname(), or its part before the first dot); every other name, "127.0.0.1"
  and "::1" included, is reached over ssh (use 127.0.0.1 or ::1 to exercise the ssh path
  on one machine). Entries naming the same host are merged (their slots add up; [::1] and
  [0::1] are one host), and both local names are one host: -H localhost:2,$(hostname):2 is
  one host with 4 slots.

environment of every rank:
  THREELC_RANK         0 .. N-1, in host order
  THREELC_SIZE         N
  THREELC_LOCAL_RANK   index of the rank among the ranks on its host
  THREELC_LOCAL_SIZE   number of ranks on its host
  THREELC_CROSS_RANK   index of its host among the hosts in use
  THREELC_CROSS_SIZE   number of hosts in use (hosts that got at least one rank)
  THREELC_COORDINATOR  host:port of rank 0's coordinator ([v6-address]:port for an IPv6
                       host). host is 127.0.0.1 when rank 0 runs here and every host in use
                       is local or a loopback address, this machine's hostname when rank 0
                       runs here and other hosts are remote, else the first host; port is
                       --port or a port free when threelcrun starts (on the IPv6 address
                       when it is this machine's, else on ::1 for an IPv6 host, on
                       127.0.0.1 otherwise)
  THREELC_SECRET       64 hex digits (secrets.token_hex(32)), fresh for every job; it never
                       appears on a command line (ssh ranks read it from ssh's stdin)
  PYTHONPATH           run from a checkout (tools/threelcrun): <repo>/frameworks/python
                       prepended, so `import threelc` works; left alone by an installed
                       threelcrun (pip), whose ranks' python finds the package itself
  OMP_NUM_THREADS      1 for ranks that share a host, unless threelcrun's environment sets it
                       (as torchrun does: each rank's OpenMP pools would otherwise take every
                       core; DDP over gloo with 4 ranks on 2 cores ran 1.7x slower)
  THREELC_TRANSPORT, THREELC_COMPRESSION, THREELC_SPARSITY, THREELC_TIMELINE,
  THREELC_START_TIMEOUT  from --transport, --compression, --sparsity, --timeline,
                       --start-timeout (only when the flag is given)
  -x VAR=value sets VAR; -x VAR forwards threelcrun's own value of VAR.
  Local ranks inherit threelcrun's whole environment. ssh ranks get the variables above,
  the -x variables and every THREELC_* variable of threelcrun's environment (e.g.
  THREELC_LIBRARY); the repository must be at the same path on every host (installed:
  the environment, and its python named by path).

ssh:
  ssh -T -o BatchMode=yes [--ssh-option ...] -o StrictHostKeyChecking=accept-new
      [-p PORT] [-i KEY] host '<remote command>'
  --ssh-port defaults to $THREELC_SSH_PORT (else ssh's own default). The remote command
  cds to this directory, reads the secret from stdin, and runs the rank in its own
  session under a small sh supervisor: when ssh's stdin closes (threelcrun stops the job,
  or threelcrun or the ssh client dies) the supervisor sends SIGTERM to the rank's process
  group, then SIGKILL after --grace seconds. The remote login shell must be POSIX sh-like.
  A remote rank's exit status is ssh's: 128+n means the rank was killed by signal n;
  255 means ssh itself failed (connection, authentication).

failure and signals:
  Each local rank runs in its own process group (signals reach its children). When a rank
  exits non-zero or is killed by a signal, the other ranks first get --failure-wait seconds
  (default 5) to stop on their own: the engine fails their pending operations with an error
  naming the failed rank, and each reports it. Those still running then get SIGTERM, then
  SIGKILL after --grace seconds, and threelcrun exits with the first failing rank's code
  (128+n for signal n). SIGINT/SIGTERM/SIGHUP to threelcrun stop every rank the same way and it exits
  130/143/129; a second Ctrl-C sends SIGKILL at once. Every rank exiting 0: exit 0.

other launchers:
  Ranks also start under mpirun, srun and torchrun; the engine reads their variables when
  THREELC_RANK is not set:
    mpirun (Open MPI)  OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE
    srun (Slurm)       SLURM_PROCID, SLURM_STEP_NUM_TASKS, SLURM_LOCALID and
                       SLURM_STEP_TASKS_PER_NODE's entry at SLURM_NODEID
    torchrun           RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR,
                       MASTER_PORT; the coordinator is MASTER_ADDR:(MASTER_PORT+1)
  Under mpirun and srun (--mpi=pmix or --mpi=pmi2) rank 0 passes its coordinator and a
  fresh THREELC_SECRET to the others through the launcher's PMIx or PMI-2: nothing to set.
  Elsewhere set THREELC_COORDINATOR and THREELC_SECRET, the same on every rank.

examples:
  threelcrun -np 4 python3 train.py
  threelcrun -np 8 -H nodeA:4,nodeB:4 -x NCCL_DEBUG=INFO --sparsity 1.5 python3 train.py
  threelcrun -np 4 -H [fd00::a]:2,[fd00::b]:2 python3 train.py
"""


def build_parser():
    p = argparse.ArgumentParser(
        prog=PROG, description=DESCRIPTION, epilog=EPILOG, allow_abbrev=False,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        usage="%(prog)s -np N [-H host:slots,... | --hostfile F] [options] cmd [args ...]")
    p.add_argument("-np", "--num-proc", dest="np", type=int, metavar="N",
                   help="number of ranks (required)")
    p.add_argument("-H", "--hosts", dest="hosts", metavar="HOST:SLOTS,...",
                   help="hosts and their slots, filled in order: host, host:K, [v6-address], "
                        "[v6-address]:K (default localhost:N)")
    p.add_argument("--hostfile", metavar="F",
                   help="file of hosts, one per line: 'host', 'host:K', 'host slots=K', the "
                        "same with [v6-address], or a bare IPv6 address ('::1 slots=2')")
    p.add_argument("-x", dest="env", action="append", default=[], metavar="VAR[=value]",
                   help="set VAR=value in every rank, or forward this environment's VAR")
    p.add_argument("--transport", choices=["tcp", "ucx"], help="THREELC_TRANSPORT")
    p.add_argument("--compression", choices=["threelc", "none"], help="THREELC_COMPRESSION")
    p.add_argument("--sparsity", type=float, metavar="S", help="THREELC_SPARSITY, in [1, 2)")
    p.add_argument("--timeline", metavar="FILE", help="THREELC_TIMELINE")
    p.add_argument("--start-timeout", type=float, metavar="S", help="THREELC_START_TIMEOUT, seconds")
    p.add_argument("--port", type=int, metavar="P", help="coordinator port (default: a free one)")
    p.add_argument("--grace", type=float, default=5.0, metavar="S",
                   help="seconds between SIGTERM and SIGKILL when stopping ranks (default 5)")
    p.add_argument("--failure-wait", type=float, default=5.0, metavar="S",
                   help="seconds the other ranks have to stop on their own (reporting their "
                        "errors) after one failed, before SIGTERM (default 5)")
    p.add_argument("--ssh-port", type=int, metavar="P", help="ssh port (default $THREELC_SSH_PORT)")
    p.add_argument("--ssh-identity", metavar="KEY", help="ssh private key (ssh -i)")
    p.add_argument("--ssh-option", action="append", default=[], metavar="OPT",
                   help="extra ssh -o option, e.g. StrictHostKeyChecking=no (repeatable; wins "
                        "over threelcrun's defaults)")
    p.add_argument("command", nargs=argparse.REMAINDER, help="the rank command and its arguments")
    return p


def parse_args(argv):
    parser = build_parser()
    args = parser.parse_args(argv)
    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    args.command = command
    try:
        validate(args)
    except UsageError as e:
        parser.print_usage(sys.stderr)
        print(f"{PROG}: error: {e}", file=sys.stderr)
        sys.exit(2)
    return args


def validate(args):
    if args.np is None:
        raise UsageError("-np N is required")
    if args.np < 1:
        raise UsageError(f"-np {args.np}: need at least 1 rank")
    if not args.command:
        raise UsageError("missing the command to run (threelcrun -np N cmd args ...)")
    if args.hosts and args.hostfile:
        raise UsageError("give -H or --hostfile, not both")
    if args.sparsity is not None and not 1.0 <= args.sparsity < 2.0:
        raise UsageError(f"--sparsity {args.sparsity}: must be in [1, 2)")
    if args.start_timeout is not None and not args.start_timeout > 0:
        raise UsageError(f"--start-timeout {args.start_timeout}: must be > 0")
    if args.port is not None and not 1 <= args.port <= 65535:
        raise UsageError(f"--port {args.port}: must be in 1..65535")
    if not args.grace >= 0:
        raise UsageError(f"--grace {args.grace}: must be >= 0")
    if not args.failure_wait >= 0:
        raise UsageError(f"--failure-wait {args.failure_wait}: must be >= 0")
    if args.ssh_port is None and os.environ.get("THREELC_SSH_PORT"):
        args.ssh_port = ssh_port_from_environment()
    if args.ssh_port is not None and not 1 <= args.ssh_port <= 65535:
        raise UsageError(f"ssh port {args.ssh_port}: must be in 1..65535")
    for opt in args.ssh_option:
        if not opt or opt.startswith("-"):
            raise UsageError(f"--ssh-option {opt!r}: give an ssh -o option such as Key=value")
    extra = {}
    for item in args.env:
        name, sep, value = item.partition("=")
        if not name or not (name[0].isalpha() or name[0] == "_") or \
                not all(c.isalnum() or c == "_" for c in name):
            raise UsageError(f"-x {item!r}: not a variable name")
        if not sep:
            if name not in os.environ:
                raise UsageError(f"-x {name}: {name} is not set in threelcrun's environment")
            value = os.environ[name]
        extra[name] = value
    args.extra_env = extra
    hosts = parse_hostfile(args.hostfile) if args.hostfile else \
        parse_host_list(args.hosts) if args.hosts else [("localhost", args.np)]
    args.placements = assign_ranks(merge_hosts(hosts), args.np)


def ssh_port_from_environment() -> int:
    """THREELC_SSH_PORT as its row in settings.py declares it; refused in threelc's one shape."""
    name, _, _, _, accepted, _, _ = next(row for row in SETTINGS if row[0] == "THREELC_SSH_PORT")
    text = os.environ[name]
    if not (text.isdigit() and text.isascii() and 1 <= int(text) <= 65535):
        raise UsageError(f"threelc: {name}={text!r} is not accepted: expected {accepted}")
    return int(text)
