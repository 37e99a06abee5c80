"""This rank's traffic and work counters since init (threelc_get_statistics)."""

from __future__ import annotations

import ctypes
from typing import NamedTuple

from .abi import _check, _fn, _Statistics

__all__ = ["Statistics", "statistics"]


class Statistics(NamedTuple):
    wire_bytes_sent: int      # bytes this rank sent on the data channels
    wire_bytes_received: int  # bytes it received on them
    operations: int           # submitted operations completed (ok or not): one per handle
    allreduce_bytes: int      # input bytes of the allreduces it completed


def statistics() -> Statistics:
    """This rank's traffic and work since init (threelc_get_statistics)."""
    s = _Statistics()
    _check(_fn("threelc_get_statistics")(ctypes.byref(s)), "threelc_get_statistics")
    return Statistics(int(s.wire_bytes_sent), int(s.wire_bytes_received), int(s.operations),
                      int(s.allreduce_bytes))
