"""Hosts and slots (-H, --hostfile), merged and filled with ranks in order; the coordinator's
host.

A host is kept as the name ssh takes: a host name, an IPv4 address, or an IPv6 address without
brackets (in its compressed form, so that `::1` and `0::1` are one host). `host_text` writes it
back with brackets where a port or a slot count follows it."""

import ipaddress
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


def ipv6_address(text):
    """The compressed form of an IPv6 address (a %scope kept), or None if text is not one."""
    try:
        return str(ipaddress.IPv6Address(text))
    except ValueError:
        return None


def host_text(name):
    """name as written before ":port" or ":slots": an IPv6 address in brackets."""
    return f"[{name}]" if ":" in name else name


def _bracketed(entry, where):
    """'[v6]' or '[v6]:K' -> (address, slots or None)."""
    close = entry.find("]")
    if close < 0:
        raise UsageError(f"{where}: {entry!r}: '[' without ']' (write an IPv6 address as "
                         "[v6-address] or [v6-address]:slots)")
    inside, rest = entry[1:close], entry[close + 1:]
    address = ipv6_address(inside)
    if address is None:
        raise UsageError(f"{where}: {entry!r}: {inside!r} is not an IPv6 address (brackets "
                         "hold an IPv6 address; write a host name or IPv4 address without them)")
    if not rest:
        return address, None
    if not rest.startswith(":"):
        raise UsageError(f"{where}: {entry!r}: expected ':slots' after ']', not {rest!r}")
    return address, _positive_int(rest[1:], f"{where}: {entry!r}")


def _bracket_hint(entry):
    """The bracketed entries a bare IPv6 entry could have meant."""
    hints = []
    if ipv6_address(entry) is not None:
        hints.append(f"[{entry}] (1 slot)")
    address, _, slots = entry.rpartition(":")
    if slots.isdigit() and ipv6_address(address) is not None:
        hints.append(f"[{address}]:{slots} ({slots} slots on {address})")
    return " or ".join(hints) if hints else "[v6-address]:slots, e.g. [::1]:2"


def _check_name(name, entry, where):
    if not name or any(c.isspace() for c in name) or name.startswith("-") \
            or any(c in name for c in "[],/"):
        raise UsageError(f"{where}: {entry!r}: bad host name")


def _parse_host_entry(entry, where, bare_ipv6=False):
    """`host`, `host:K`, `[v6]`, `[v6]:K` -> (name, K or None). With bare_ipv6 (a hostfile
    line), an entry that is an IPv6 address as a whole is that address."""
    entry = entry.strip()
    if not entry:
        raise UsageError(f"{where}: empty host entry")
    if entry.startswith("["):
        return _bracketed(entry, where)
    if entry.count(":") > 1:
        if bare_ipv6:
            if ipv6_address(entry) is not None:
                return ipv6_address(entry), None
            raise UsageError(f"{where}: {entry!r}: neither an IPv6 address nor host:slots "
                             f"(an IPv6 address with slots: {_bracket_hint(entry)})")
        raise UsageError(f"{where}: {entry!r}: an IPv6 address takes brackets here: "
                         f"{_bracket_hint(entry)}")
    name, sep, slots = entry.partition(":")
    _check_name(name, entry, where)
    return name, _positive_int(slots, f"{where}: {entry!r}") if sep else None


def parse_host_list(text):
    """-H host1:slots,[v6]:slots,... -> [(name, slots)]"""
    hosts = []
    for entry in text.split(","):
        name, slots = _parse_host_entry(entry, "-H")
        hosts.append((name, slots or 1))
    return hosts


HOSTFILE_FORMS = ("'host', 'host:K', 'host slots=K', '[v6]', '[v6]:K', '[v6] slots=K', 'v6' or "
                  "'v6 slots=K'")


def _parse_hostfile_line(line, where):
    words = line.split()
    name, colon_slots = _parse_host_entry(words[0], where, bare_ipv6=True)
    keys = {}
    for word in words[1:]:
        key, sep, value = word.partition("=")
        if not sep or key not in ("slots", "max_slots"):
            raise UsageError(f"{where}: {line!r}: {word!r} is not slots=K or max_slots=K "
                             f"(a line is {HOSTFILE_FORMS})")
        if key in keys:
            raise UsageError(f"{where}: {line!r}: {key}= given twice")
        keys[key] = _positive_int(value, f"{where}: {line!r}: {key}")
    if "slots" in keys and colon_slots is not None:
        raise UsageError(f"{where}: {line!r}: two slot counts (':K' and 'slots=')")
    slots_given = keys.get("slots", colon_slots)
    slots = slots_given or 1
    if "max_slots" in keys:
        # threelcrun never puts more ranks on a host than its slots: max_slots (Open MPI's
        # bound for oversubscription) only has to be consistent with them.
        if slots_given is None:
            raise UsageError(f"{where}: {line!r}: max_slots= without a slot count: give slots=K "
                             "(threelcrun places at most slots ranks on a host and never "
                             "oversubscribes)")
        if keys["max_slots"] < slots:
            raise UsageError(f"{where}: {line!r}: max_slots={keys['max_slots']} is below "
                             f"slots={slots}")
    return name, slots


def parse_hostfile(path):
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise UsageError(f"--hostfile {path}: {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise UsageError(f"--hostfile {path}: not UTF-8 text ({e.reason})") from None
    hosts = []
    for number, line in enumerate(lines, 1):
        line = line.split("#", 1)[0].strip()
        if line:
            hosts.append(_parse_hostfile_line(line, f"{path}:{number}"))
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


def is_loopback(name):
    """A name for this machine reached over ssh (127.x.y.z, ::1), or a local name."""
    if is_local(name):
        return True
    try:
        return ipaddress.ip_address(name.split("%", 1)[0]).is_loopback
    except ValueError:
        return False


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
        listing = ",".join(f"{host_text(h)}:{s}" for h, s in hosts)
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
    """Rank 0's host as the other ranks reach it (bare; host_text adds IPv6's brackets)."""
    first = placements[0]
    if not first["local"]:
        return first["host"]
    if all(is_loopback(p["host"]) for p in placements):
        return "127.0.0.1"
    return socket.gethostname()
