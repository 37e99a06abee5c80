"""Fixtures for the threelcrun tests: a rank environment, a throwaway sshd (sshd.py); the
transport variant's selection of tests."""

import os
import shutil
import tempfile

import pytest

from sshd import SSHD, Sshd


@pytest.fixture
def run_env():
    """Environment for threelcrun: bytecode off, and no PYTHONPATH tricks of the caller."""
    env = dict(os.environ)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.pop("THREELC_SSH_PORT", None)
    env.pop("OMP_NUM_THREADS", None)  # threelcrun sets it for ranks sharing a host
    return env


@pytest.fixture(scope="session")
def sshd():
    if not os.path.exists(SSHD):
        pytest.skip(f"{SSHD} is missing (Debian package openssh-server)")
    if not shutil.which("ssh") or not shutil.which("ssh-keygen"):
        pytest.skip("ssh or ssh-keygen is missing (Debian package openssh-client)")
    with tempfile.TemporaryDirectory(prefix="threelcrun-sshd-") as d:
        os.chmod(d, 0o700)
        server = Sshd(d)
        try:
            server.start()
        except (RuntimeError, OSError) as e:
            pytest.skip(f"cannot start a test sshd: {e}")
        try:
            ok, err = server.check_login()
            if not ok:
                pytest.skip(f"cannot log in to the test sshd as this user: {err.strip()}")
            yield server
        finally:
            server.stop()


# The launcher's own behaviour (environment, output, signals, ssh) does not depend on the
# transport: ctest's launcher_tests_ucx (THREELC_TRANSPORT=ucx, see tests/CMakeLists.txt) runs
# only the jobs that move data, test_transport_jobs.py. test_launcher.py also checks that
# THREELC_TRANSPORT is unset in a rank's environment unless --transport is given.
LAUNCHER_ONLY = ("test_launcher.py", "test_hosts.py", "test_ssh.py")


def pytest_collection_modifyitems(config, items):
    transport = os.environ.get("THREELC_TRANSPORT", "tcp")
    if transport == "tcp":
        return
    skip = pytest.mark.skip(reason=f"launcher-only test: run by launcher_tests (tcp), not "
                                   f"under THREELC_TRANSPORT={transport}")
    for item in items:
        if item.fspath.basename in LAUNCHER_ONLY:
            item.add_marker(skip)
