"""Horovod's process sets: :class:`ProcessSet`, ``global_process_set``, ``add_process_set`` /
``remove_process_set`` and ``init(process_sets=[...])``'s registration, over the engine's process
sets (:mod:`threelc.engine.process_sets`).

Adding and removing a set are collective over every rank of the job: every rank makes the same
calls in the same order (a set's non-members too). Sets can be added at any time after
``init()``; ``init(process_sets="dynamic")`` is accepted and changes nothing. Ids count up from
1 and are never reused while the engine runs (Horovod reuses removed ids). ``shutdown()``
forgets every set: the objects lose their ids.
"""

from __future__ import annotations

import weakref
from typing import List, Optional, Sequence

import numpy as np

from .. import engine as _engine
from ..engine import ThreelcError
from .errors import InvalidArgumentError, _refusals


class ProcessSet:
    """Horovod's process set: job ranks (kept sorted) that run collectives among themselves.

    ``process_set_id`` is None until :func:`threelc.torch.add_process_set` or
    ``init(process_sets=[...])`` registers the set with the engine, and None again once it is
    removed. Passed as ``process_set=`` to a collective, the collective runs among the members
    only and in the set's terms: rank and size are the set's (member i is its i-th lowest job
    rank), so Average divides by the set's size, allgather concatenates in member order and
    alltoall's splits have one entry per member; a broadcast's root_rank stays a job rank.
    Ranks outside the set that submit to it are refused at once. ``global_process_set`` (id 0)
    is every rank; its ``ranks`` are filled in by ``init()``."""

    mpi_comm = None  # Horovod's attribute: threelc has no MPI communicators

    def __init__(self, ranks):
        try:
            members = sorted(ranks)
        except TypeError:
            raise ValueError(f"ProcessSet takes a list of job ranks (ints), got {ranks!r} "
                             f"(threelc has no MPI communicators)") from None
        if any(isinstance(r, bool) or not isinstance(r, (int, np.integer)) for r in members):
            raise ValueError(f"ProcessSet takes a list of job ranks (ints), got {members!r}")
        self.ranks = [int(r) for r in members]
        self.process_set_id = None

    def _invalidate(self) -> None:
        self.process_set_id = None

    def _query(self, query):
        """The engine's answer about this set; ValueError (as Horovod) when it has none."""
        if self.process_set_id is None:
            return None
        try:
            return query(self.process_set_id)
        except ThreelcError as error:
            if error.code == _engine.ENOTINIT:
                raise ValueError("threelc has not been initialized; use hvd.init().") from None
            raise InvalidArgumentError(f"{self}: {error}", error.code) from None

    def size(self) -> Optional[int]:
        """The number of ranks in the set; None while it is not registered."""
        return self._query(_engine.process_set_size)

    def rank(self) -> Optional[int]:
        """This rank's index among the members (ValueError on a rank outside the set); None
        while it is not registered."""
        return self._query(_engine.process_set_rank)

    def included(self) -> bool:
        """Whether this rank is a member (ValueError before ``init()``)."""
        me = _engine.rank()
        if me < 0:
            raise ValueError("threelc has not been initialized; use hvd.init().")
        return me in self.ranks

    def __str__(self) -> str:
        return f"ProcessSet(process_set_id={self.process_set_id}, ranks={self.ranks})"

    __repr__ = __str__


global_process_set = ProcessSet([])
global_process_set.process_set_id = 0


# The sets this process registered, to be told at shutdown that their ids are gone.
_registered: "weakref.WeakSet[ProcessSet]" = weakref.WeakSet()


def _as_process_set(process_set) -> ProcessSet:
    return process_set if isinstance(process_set, ProcessSet) else ProcessSet(process_set)


def _check_new(process_set: ProcessSet, what: str) -> None:
    """Refuses, before anything is submitted, a set the engine would refuse for its ranks:
    the same decision on every rank, since every rank's table is the same between adds."""
    size = _engine.size()
    outside = [r for r in process_set.ranks if not 0 <= r < size]
    if outside:
        raise ValueError(f"{what}: ranks {outside} are not ranks of this job of {size}")
    if len(set(process_set.ranks)) != len(process_set.ranks):
        raise ValueError(f"{what}: a rank appears twice in {process_set.ranks}")
    for set_id in _engine.process_set_ids():
        if _engine.process_set_ranks(set_id) == process_set.ranks:
            raise ValueError(f"Attempted to add a duplicate process set: {process_set} has "
                             f"the ranks of process set {set_id}")


def _register(process_set: ProcessSet) -> ProcessSet:
    with _refusals():
        process_set.process_set_id = _engine.add_process_set(process_set.ranks)
    _registered.add(process_set)
    return process_set


def add_process_set(process_set) -> ProcessSet:
    """Adds a process set (a :class:`ProcessSet` or a list of job ranks) on every rank and
    returns it, registered. Collective: every rank calls it, in the same order. ValueError for
    a set whose ranks a set already has (the global set counts), ranks outside the job, a rank
    given twice, or a ProcessSet already registered."""
    if not _engine.is_initialized():
        raise ValueError("threelc has not been initialized; use hvd.init().")
    process_set = _as_process_set(process_set)
    if process_set.process_set_id is not None:
        raise ValueError(f"{process_set} is registered already")
    _check_new(process_set, "add_process_set")
    return _register(process_set)


def remove_process_set(process_set: ProcessSet) -> bool:
    """Removes `process_set` on every rank (collective, as add_process_set) and returns True;
    its operations still pending fail, and the object loses its id. Returns False, removing
    nothing, for the global set or a set that is not registered."""
    if not isinstance(process_set, ProcessSet):
        raise TypeError(f"remove_process_set takes a ProcessSet, got {process_set!r}")
    set_id = process_set.process_set_id
    if set_id is None or set_id == 0:
        return False
    process_set._invalidate()
    _registered.discard(process_set)
    with _refusals():
        _engine.remove_process_set(set_id)
    return True


def _process_set_list(process_sets) -> List[ProcessSet]:
    """init()'s `process_sets` checked before the engine starts: None or "dynamic" (no sets),
    or ProcessSets with distinct ranks."""
    if process_sets is None or (isinstance(process_sets, str) and
                                process_sets.lower() == "dynamic"):
        return []
    if isinstance(process_sets, (str, ProcessSet)):
        raise TypeError(f"process_sets must be a list of ProcessSet, \"dynamic\" or None, got "
                        f"{process_sets!r}")
    sets = list(process_sets)
    for i, ps in enumerate(sets):
        if not isinstance(ps, ProcessSet):
            raise TypeError(f"process_sets entry number {i} is not a ProcessSet: {ps!r}")
        if any(ps.ranks == other.ranks for other in sets[:i]):
            raise ValueError(f"threelc could not be initialized because process_sets entry "
                             f"number {i} is a duplicate: {ps}")
    return sets


def _register_at_init(sets: Sequence[ProcessSet]) -> None:
    """init()'s part, every rank alike once the engine runs: the global set's ranks, then the
    sets of `sets` in order (ids 1, 2, ... on a fresh engine). A set registered already (init()
    called again with it) is kept."""
    global_process_set.ranks = _engine.process_set_ranks(0)
    known = set(_engine.process_set_ids())
    new = [ps for ps in sets if ps.process_set_id not in known or ps.process_set_id == 0]
    for i, ps in enumerate(sets):
        if ps in new:
            _check_new(ps, f"process_sets entry number {i}")
    for ps in new:
        _register(ps)


def _forget_process_sets() -> None:
    """At shutdown: the engine's sets are gone, and so are the objects' ids."""
    for ps in list(_registered):
        ps._invalidate()
    _registered.clear()
