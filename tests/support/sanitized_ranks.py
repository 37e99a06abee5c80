"""What a Python-hosted test needs to know of a sanitizer build: how much slower to expect it,
and the threelcrun options that carry its runtime to ranks started over ssh.

In a sanitizer build (tests/sanitizers.cmake) ctest preloads the sanitizer's runtime into each
Python-hosted test through LD_PRELOAD, and every rank started locally inherits it, with the
sanitizer's options (tools/dev/sanitize_tests.sh). threelcrun passes only THREELC_* variables to a
rank it starts over ssh, so a test that starts ranks there adds these -x options; outside a
sanitizer build there are none.
"""

from __future__ import annotations

import os

# Factor of the tests' own job timeouts: set by sanitizer builds (tests/sanitizers.cmake), 1
# elsewhere.
TIMEOUT_SCALE = float(os.environ.get("THREELC_TEST_TIMEOUT_SCALE", "1"))

VARIABLES = ("LD_PRELOAD", "ASAN_OPTIONS", "LSAN_OPTIONS", "UBSAN_OPTIONS", "TSAN_OPTIONS",
             "UCX_MEM_MMAP_HOOK_MODE", "UCX_MEM_MALLOC_HOOKS")


def sanitizer_preloaded(environ=os.environ) -> bool:
    preload = environ.get("LD_PRELOAD", "")
    return "libasan" in preload or "libtsan" in preload


def threelcrun_options(environ=os.environ) -> list[str]:
    """["-x", "NAME=value", ...] for each sanitizer variable set; [] outside a sanitizer build."""
    if not sanitizer_preloaded(environ):
        return []
    options = []
    for name in VARIABLES:
        if name in environ:
            options += ["-x", f"{name}={environ[name]}"]
    return options

