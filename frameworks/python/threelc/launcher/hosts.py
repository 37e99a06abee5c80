"""Hosts and slots (-H, --hostfile), merged and filled with ranks in order; the coordinator's
host."""

import socket


class UsageError(Exception):
    pass


def _positive_int(text, what):
    try:
        value = int(text)
    except ValueError:
        raise UsageError(f"{what}: {text!r} is not a whole number") from None
    if value < 1:
        raise UsageError(f"{what}: {value} slots; a host needs at least 1")
    return value


def _parse_host_entry(entry, where):
    entry = entry.strip()
    if not entry:
        raise UsageError(f"{where}: empty host entry")
    if entry.count(":") > 1 or entry.startswith("["):
        raise UsageError(f"{where}: {entry!r}: IPv6 addresses are not supported; use a host name")
    if ":" in entry:
        name, slots = entry.split(":", 1)
        slots = _positive_int(slots, f"{where}: {entry!r}")
    else:
        name, slots = entry, 1
    name = name.strip()
    if not name or any(c.isspace() for c in name) or name.startswith("-"):
        raise UsageError(f"{where}: {entry!r}: bad host name")
    return name, slots


def parse_host_list(text):
    """-H host1:slots,host2:slots -> [(name, slots)]"""
    return [_parse_host_entry(e, "-H") for e in text.split(",")]


def parse_hostfile(path):
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise UsageError(f"--hostfile {path}: {e.strerror}") from None
    hosts = []
    for number, line in enumerate(lines, 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        where = f"{path}:{number}"
        words = line.split()
        if len(words) == 1:
            hosts.append(_parse_host_entry(words[0], where))
        elif len(words) == 2 and words[1].startswith("slots=") and ":" not in words[0]:
            name, _ = _parse_host_entry(words[0], where)
            hosts.append((name, _positive_int(words[1][len("slots="):], f"{where}: {line!r}")))
        else:
            raise UsageError(f"{where}: {line!r}: expected 'host slots=K', 'host:K' or 'host'")
    if not hosts:
        raise UsageError(f"--hostfile {path}: no hosts in the file")
    return hosts


def local_names():
    names = {"localhost"}
    hostname = socket.gethostname()
    if hostname:
        names.add(hostname)
        names.add(hostname.split(".", 1)[0])
    return names


def is_local(name):
    return name in local_names()


def merge_hosts(hosts):
    """Merge entries naming the same host (all local names are one host), keeping order."""
    merged = {}
    for name, slots in hosts:
        key = "localhost" if is_local(name) else name
        merged[key] = merged.get(key, 0) + slots
    return list(merged.items())


def assign_ranks(hosts, np):
    """[(host, slots)] -> list of rank placements (dicts), hosts filled in order."""
    total = sum(slots for _, slots in hosts)
    if np > total:
        listing = ",".join(f"{h}:{s}" for h, s in hosts)
        raise UsageError(f"-np {np} but the hosts have only {total} slot"
                         f"{'s' if total != 1 else ''} ({listing})")
    used = []
    remaining = np
    for name, slots in hosts:
        if remaining == 0:
            break
        take = min(slots, remaining)
        used.append((name, take))
        remaining -= take
    placements = []
    rank = 0
    for cross_rank, (name, count) in enumerate(used):
        for local_rank in range(count):
            placements.append({
                "rank": rank, "host": name, "local": is_local(name),
                "local_rank": local_rank, "local_size": count,
                "cross_rank": cross_rank, "cross_size": len(used),
            })
            rank += 1
    return placements


def coordinator_host(placements):
    first = placements[0]
    if not first["local"]:
        return first["host"]
    loopback = {"localhost", "127.0.0.1"} | local_names()
    if all(p["local"] or p["host"] in loopback or p["host"].startswith("127.")
           for p in placements):
        return "127.0.0.1"
    return socket.gethostname()
