"""The variables every rank gets: the job's (size, coordinator, secret, the flags' settings)
and each rank's identity."""

import os
import secrets
import socket

from .hosts import coordinator_host, host_text, ipv6_address


def checkout_python_dir():
    """frameworks/python of the repository this launcher lies in (tools/threelcrun, or an
    editable install), which the ranks' PYTHONPATH starts with so that `import threelc` finds
    the checkout's package; None for an installed threelc (pip), which the ranks' Python finds
    by itself."""
    package_parent = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))
    repo = os.path.dirname(os.path.dirname(package_parent))
    if (package_parent == os.path.join(repo, "frameworks", "python")
            and os.path.isfile(os.path.join(repo, "tools", "threelcrun"))):
        return package_parent
    return None


def free_port(host="127.0.0.1"):
    """A port free on this machine for the coordinator at `host`: bound on that IPv6 address
    when host is one (on ::1 when the address is not this machine's), else on 127.0.0.1. For a
    coordinator on another host it is a guess (--port chooses it)."""
    tries = [(socket.AF_INET, "127.0.0.1")]
    if ipv6_address(host) is not None:
        tries = [(socket.AF_INET6, host), (socket.AF_INET6, "::1")] + tries
    for family, address in tries:
        try:
            with socket.socket(family, socket.SOCK_STREAM) as s:
                s.bind((address, 0))
                return s.getsockname()[1]
        except OSError as e:
            error = e
    raise OSError(f"no free port for the coordinator on {host}: {error}")


def job_env(args):
    """Variables common to every rank (without the per-rank ones and without PYTHONPATH)."""
    host = coordinator_host(args.placements)
    env = {
        "THREELC_SIZE": str(args.np),
        # [v6-address]:port for an IPv6 host (the engine's THREELC_COORDINATOR takes both)
        "THREELC_COORDINATOR": f"{host_text(host)}:{args.port or free_port(host)}",
        "THREELC_SECRET": secrets.token_hex(32),
    }
    for flag, var in (("transport", "THREELC_TRANSPORT"), ("compression", "THREELC_COMPRESSION"),
                      ("sparsity", "THREELC_SPARSITY"), ("timeline", "THREELC_TIMELINE"),
                      ("start_timeout", "THREELC_START_TIMEOUT")):
        value = getattr(args, flag)
        if value is not None:
            env[var] = str(value)
    return env


def rank_env(job, placement):
    env = dict(job)
    env.update({
        "THREELC_RANK": str(placement["rank"]),
        "THREELC_LOCAL_RANK": str(placement["local_rank"]),
        "THREELC_LOCAL_SIZE": str(placement["local_size"]),
        "THREELC_CROSS_RANK": str(placement["cross_rank"]),
        "THREELC_CROSS_SIZE": str(placement["cross_size"]),
    })
    if placement["local_size"] > 1 and "OMP_NUM_THREADS" not in os.environ:
        # As torchrun does: ranks that share a host would each start OpenMP pools of every
        # core (torch.set_num_threads covers only the thread that calls it).
        env["OMP_NUM_THREADS"] = "1"
    return env
