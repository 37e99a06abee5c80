"""Process sets (Horovod's): subsets of the job's ranks that run collectives among themselves.

Every collective of :mod:`threelc.engine.collectives` takes ``process_set=<id>`` (0, the
default, is every rank). Adding and removing a set are negotiated among every rank of the job:
every rank calls :func:`add_process_set` / :func:`remove_process_set` in the same order with the
same arguments (as a collective of set 0), and each returns once the engine has executed it on
this rank. Ids count up from 1 and are never reused. The queries read this rank's table.
"""

from __future__ import annotations

import ctypes
from typing import List, Optional, Sequence

import numpy as np

from .abi import _check, _fn
from .arguments import _process_set_id
from .collectives import _submit_call
from .handles import Handle
from .results import _result

__all__ = [
    "add_process_set", "add_process_set_async", "remove_process_set",
    "remove_process_set_async", "process_set_size", "process_set_rank", "process_set_included",
    "process_set_ranks", "process_set_ids",
]


def _ranks(ranks: Sequence[int]) -> List[int]:
    """The ranks as ints that fit a C int (the engine checks them against the job)."""
    try:
        members = list(ranks)
    except TypeError:
        raise TypeError(f"ranks must be a sequence of ints, got {ranks!r}") from None
    for r in members:
        if isinstance(r, bool) or not isinstance(r, (int, np.integer)):
            raise TypeError(f"ranks must be ints, got {r!r} in {members!r}")
        if not -2**31 <= int(r) < 2**31:
            raise ValueError(f"rank {r} is not a rank of this job")
    return [int(r) for r in members]


def add_process_set_async(ranks: Sequence[int]) -> Handle:
    """Submits the addition of a set of `ranks` (job ranks, distinct, any order); ``wait()``
    returns its id."""
    members = _ranks(ranks)
    array = (ctypes.c_int * max(1, len(members)))(*members)
    return _submit_call("threelc_add_process_set", (array, len(members)), "add_process_set",
                        None, (array,), lambda hid: int(_result(hid).process_set))


def add_process_set(ranks: Sequence[int], timeout: Optional[float] = None) -> int:
    """Adds a process set of `ranks` on every rank (each rank calls it, in the same order) and
    returns its id. Raises ThreelcError: EINVAL for ranks outside the job, repeated, or the
    ranks of a set that exists (naming it), EMISMATCH when ranks asked for different sets."""
    return add_process_set_async(ranks).wait(timeout)


def remove_process_set_async(process_set: int) -> Handle:
    """Submits the removal of set `process_set`; ``wait()`` returns None."""
    set_id = _process_set_id(process_set)
    return _submit_call("threelc_remove_process_set", (set_id,), "remove_process_set", None, (),
                        lambda hid: None)


def remove_process_set(process_set: int, timeout: Optional[float] = None) -> None:
    """Removes set `process_set` on every rank (each rank calls it, in the same order). Its
    operations still pending fail (EINVAL); later uses of the id are refused. Raises
    ThreelcError(EINVAL) for set 0 or an id that names no set."""
    remove_process_set_async(process_set).wait(timeout)


def process_set_size(process_set: int) -> int:
    """The number of ranks in the set (EINVAL for an unknown or removed id)."""
    return _check(_fn("threelc_process_set_size")(_process_set_id(process_set)),
                  "threelc_process_set_size")


def process_set_included(process_set: int) -> bool:
    """Whether this rank is a member of the set (EINVAL for an unknown or removed id)."""
    return bool(_check(_fn("threelc_process_set_included")(_process_set_id(process_set)),
                       "threelc_process_set_included"))


def process_set_rank(process_set: int) -> int:
    """This rank's index among the set's members. Raises ThreelcError(EINVAL) when this rank
    is not a member (as Horovod raises), or for an unknown or removed id; the message says
    which."""
    return _check(_fn("threelc_process_set_rank")(_process_set_id(process_set)),
                  "threelc_process_set_rank")


def process_set_ranks(process_set: int) -> List[int]:
    """The set's members (job ranks, ascending)."""
    set_id = _process_set_id(process_set)
    # An id's members never change, so the size asked first is the size written.
    n = _check(_fn("threelc_process_set_ranks")(set_id, None, 0), "threelc_process_set_ranks")
    out = (ctypes.c_int * max(1, n))()
    _check(_fn("threelc_process_set_ranks")(set_id, out, n), "threelc_process_set_ranks")
    return list(out[:n])


def process_set_ids() -> List[int]:
    """The ids of the sets this rank knows, ascending (0 first)."""
    while True:  # a set added between the two calls: ask again
        n = _check(_fn("threelc_process_set_ids")(None, 0), "threelc_process_set_ids")
        out = (ctypes.c_int * max(1, n))()
        got = _check(_fn("threelc_process_set_ids")(out, n), "threelc_process_set_ids")
        if got <= n:
            return list(out[:got])
