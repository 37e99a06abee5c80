"""threelcrun's host forms (-H, --hostfile), IPv6 included: what each form means, each error
(naming the entry, and a hostfile's file:line), and how an IPv6 host reaches the coordinator's
address, its free port and the ssh command line. In process, except the command-line checks."""

import re
import socket

import pytest

from launcher_jobs import launch
from sshd import ipv6_loopback_up
from threelc.launcher.environment import free_port, job_env
from threelc.launcher.hosts import (UsageError, assign_ranks, coordinator_host, host_text,
                                    merge_hosts, parse_host_list, parse_hostfile)
from threelc.launcher.options import parse_args
from threelc.launcher.remote import ssh_argv


needs_ipv6 = pytest.mark.skipif(not ipv6_loopback_up(), reason="::1 is not up on this machine")


def hostfile(tmp_path, text):
    f = tmp_path / "hosts"
    f.write_text(text)
    return str(f)


# ------------------------------------------------------------------------------------ -H

def test_host_list_forms():
    assert parse_host_list("a:2,b,c:3") == [("a", 2), ("b", 1), ("c", 3)]
    assert parse_host_list("10.0.0.1:4, nodeB") == [("10.0.0.1", 4), ("nodeB", 1)]
    # IPv6 in brackets; kept bare (as ssh takes it) and compressed
    assert parse_host_list("[::1]:2,[fd00::a],[0:0::1]:3,[fe80::1%eth0]:2") == \
        [("::1", 2), ("fd00::a", 1), ("::1", 3), ("fe80::1%eth0", 2)]
    assert parse_host_list("[FD00:0:0::B]") == [("fd00::b", 1)]


@pytest.mark.parametrize("entry,message", [
    # a bare IPv6 address is ambiguous in -H: the error names the bracket forms it could mean
    ("::1:2", "'::1:2': an IPv6 address takes brackets here: [::1:2] (1 slot) or [::1]:2 "
              "(2 slots on ::1)"),
    ("fe80::1", "'fe80::1': an IPv6 address takes brackets here: [fe80::1] (1 slot)"),
    ("a:1:2", "'a:1:2': an IPv6 address takes brackets here: [v6-address]:slots, e.g. [::1]:2"),
    ("[::1", "'[::1': '[' without ']'"),
    ("[nodeA]:2", "'[nodeA]:2': 'nodeA' is not an IPv6 address"),
    ("[10.0.0.1]", "'10.0.0.1' is not an IPv6 address"),
    ("[]", "'' is not an IPv6 address"),
    ("[::1]x", "'[::1]x': expected ':slots' after ']', not 'x'"),
    ("[::1]2", "expected ':slots' after ']', not '2'"),
    ("[::1]:0", "'[::1]:0': 0 slots; a host needs at least 1"),
    ("[::1]:", "'[::1]:': '' is not a whole number"),
    ("[::1]:two", "'two' is not a whole number"),
    ("a:0", "'a:0': 0 slots; a host needs at least 1"),
    ("a:-1", "-1 slots"),
    ("a:x", "'a:x': 'x' is not a whole number"),
    (",a", "-H: empty host entry"),
    ("a,,b", "-H: empty host entry"),
    ("-a:1", "'-a:1': bad host name"),
    (":2", "':2': bad host name"),
    ("a]:2", "bad host name"),
])
def test_host_list_errors(entry, message):
    with pytest.raises(UsageError) as e:
        parse_host_list(entry)
    assert str(e.value).startswith("-H: ")
    assert message in str(e.value)


# ------------------------------------------------------------------------------- hostfile

def test_hostfile_forms(tmp_path):
    f = hostfile(tmp_path, "# the cluster\n"
                           "nodeA slots=4\n"
                           "\n"
                           "nodeB:2   # two GPUs\n"
                           "nodeC\n"
                           "[fd00::1]\n"
                           "[fd00::2]:3\n"
                           "[fd00::3] slots=2\n"
                           "  fd00::4   slots=5  \n"
                           "fd00::5\n"
                           "::1:2\n"                      # alone on its line: the address ::1:2
                           "fe80::1%eth0 slots=2\n"
                           "nodeD slots=2 max_slots=4\n"  # Open MPI's bound: checked, ignored
                           "nodeE:3 max_slots=3\n"
                           "[fd00::6] max_slots=8 slots=2\n"
                           "fd00::7 slots=1 max_slots=1 # last\n")
    assert parse_hostfile(f) == [
        ("nodeA", 4), ("nodeB", 2), ("nodeC", 1), ("fd00::1", 1), ("fd00::2", 3),
        ("fd00::3", 2), ("fd00::4", 5), ("fd00::5", 1), ("::1:2", 1), ("fe80::1%eth0", 2),
        ("nodeD", 2), ("nodeE", 3), ("fd00::6", 2), ("fd00::7", 1)]


@pytest.mark.parametrize("line,message", [
    ("nodeA slots=two", "'nodeA slots=two': slots: 'two' is not a whole number"),
    ("nodeA slots=0", "'nodeA slots=0': slots: 0 slots; a host needs at least 1"),
    ("nodeA 4", "'nodeA 4': '4' is not slots=K or max_slots=K (a line is 'host', 'host:K', "
                "'host slots=K', '[v6]', '[v6]:K', '[v6] slots=K', 'v6' or 'v6 slots=K')"),
    ("nodeA cpus=2", "'cpus=2' is not slots=K or max_slots=K"),
    ("nodeA slots=2 slots=3", "'nodeA slots=2 slots=3': slots= given twice"),
    ("nodeA:2 slots=3", "'nodeA:2 slots=3': two slot counts (':K' and 'slots=')"),
    ("[::1]:2 slots=2", "'[::1]:2 slots=2': two slot counts"),
    ("nodeA max_slots=4", "'nodeA max_slots=4': max_slots= without a slot count: give slots=K"),
    ("::1 max_slots=4", "max_slots= without a slot count"),
    ("nodeA slots=3 max_slots=2", "'nodeA slots=3 max_slots=2': max_slots=2 is below slots=3"),
    ("nodeA slots=1 max_slots=x", "max_slots: 'x' is not a whole number"),
    ("::zz:1", "'::zz:1': neither an IPv6 address nor host:slots"),
    ("fd00::1:2:x slots=2", "'fd00::1:2:x': neither an IPv6 address nor host:slots"),
    ("[nodeA] slots=2", "'[nodeA]': 'nodeA' is not an IPv6 address"),
    ("[::1 slots=2", "'[::1': '[' without ']'"),
    ("[::1]:0", "'[::1]:0': 0 slots"),
    ("nodeA:x", "'nodeA:x': 'x' is not a whole number"),
    ("-nodeA", "'-nodeA': bad host name"),
    ("a,b slots=2", "'a,b': bad host name"),
])
def test_hostfile_errors_name_file_line_and_entry(line, message, tmp_path):
    f = hostfile(tmp_path, f"# first\nnodeZ slots=1\n{line}\nnodeY\n")
    with pytest.raises(UsageError) as e:
        parse_hostfile(f)
    assert str(e.value).startswith(f"{f}:3: "), str(e.value)
    assert message in str(e.value)


def test_hostfile_without_hosts_or_unreadable(tmp_path):
    with pytest.raises(UsageError, match="no hosts in the file"):
        parse_hostfile(hostfile(tmp_path, "# nothing\n\n   # here\n"))
    with pytest.raises(UsageError, match=r"--hostfile /nonexistent/hosts: No such file"):
        parse_hostfile("/nonexistent/hosts")
    f = tmp_path / "binary"
    f.write_bytes(b"node\xff slots=2\n")
    with pytest.raises(UsageError, match="not UTF-8 text"):
        parse_hostfile(str(f))


# ------------------------------------------------- placement, coordinator, free port, ssh

def test_ipv6_hosts_merge_and_are_reached_over_ssh():
    hosts = merge_hosts(parse_host_list("[::1]:1,[0::1]:1,[fd00::1]:2"))
    assert hosts == [("::1", 2), ("fd00::1", 2)]
    placements = assign_ranks(hosts, 3)
    assert [(p["host"], p["local"], p["cross_rank"]) for p in placements] == \
        [("::1", False, 0), ("::1", False, 0), ("fd00::1", False, 1)]
    assert coordinator_host(placements) == "::1"
    with pytest.raises(UsageError, match=re.escape("only 4 slots ([::1]:2,[fd00::1]:2)")):
        assign_ranks(hosts, 5)
    assert host_text("fd00::1") == "[fd00::1]" and host_text("nodeA") == "nodeA"
    assert host_text("10.0.0.1") == "10.0.0.1"


def test_loopback_ipv6_with_local_rank_0_uses_127_0_0_1():
    # rank 0 here and every other host a loopback address (::1 over ssh): this machine
    placements = assign_ranks(merge_hosts(parse_host_list("localhost:1,[::1]:1")), 2)
    assert coordinator_host(placements) == "127.0.0.1"
    placements = assign_ranks(merge_hosts(parse_host_list("localhost:1,[fd00::1]:1")), 2)
    assert coordinator_host(placements) == socket.gethostname()


@needs_ipv6
def test_coordinator_of_an_ipv6_rank_0_is_bracketed():
    for hosts in (["-H", "[::1]:2"], ["-H", "[0::1]:1,localhost:1"]):
        env = job_env(parse_args(["-np", "2", *hosts, "true"]))
        m = re.fullmatch(r"\[::1\]:(\d+)", env["THREELC_COORDINATOR"])
        assert m, env["THREELC_COORDINATOR"]
        # the port was chosen on ::1 and is free there
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", int(m.group(1))))
    env = job_env(parse_args(["-np", "2", "-H", "[fd00::1]:2", "--port", "2345", "true"]))
    assert env["THREELC_COORDINATOR"] == "[fd00::1]:2345"
    env = job_env(parse_args(["-np", "2", "-H", "nodeA:2", "--port", "2345", "true"]))
    assert env["THREELC_COORDINATOR"] == "nodeA:2345"


@needs_ipv6
def test_free_port_of_an_ipv6_coordinator():
    # on the address itself when it is this machine's; a v6 address elsewhere: on ::1
    for host in ("::1", "fd00::1234:5678"):
        port = free_port(host)
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", port))
    assert 0 < free_port() < 65536


def test_ssh_gets_the_address_without_brackets():
    args = parse_args(["-np", "2", "-H", "[::1]:2", "true"])
    argv = ssh_argv(args, args.placements[0]["host"], "REMOTE")
    assert argv[-2:] == ["::1", "REMOTE"]


# ------------------------------------------------------------------- on the command line

def test_command_line_errors(tmp_path, run_env):
    r = launch(["-np", "1", "-H", "::1:2", "true"], run_env)
    assert r.returncode == 2
    assert "threelcrun: error: -H: '::1:2': an IPv6 address takes brackets here: " \
           "[::1:2] (1 slot) or [::1]:2 (2 slots on ::1)" in r.stderr, r.stderr
    f = hostfile(tmp_path, "nodeA slots=1\n::1 slots=2 bogus\n")
    r = launch(["-np", "1", "--hostfile", f, "true"], run_env)
    assert r.returncode == 2
    assert f"threelcrun: error: {f}:2: '::1 slots=2 bogus': 'bogus' is not slots=K" in r.stderr


def test_help_lists_the_host_forms(run_env):
    r = launch(["--help"], run_env)
    assert r.returncode == 0
    for form in ["host:K", "[v6-address]:K", "host slots=K", "[v6-address] slots=K",
                 "::1 slots=2", "max_slots", "[v6-address]:port", "ssh ::1"]:
        assert form in r.stdout, form
