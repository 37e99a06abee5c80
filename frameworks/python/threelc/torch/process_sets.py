"""Horovod's ``add_process_set`` / ``remove_process_set`` and ``init(process_sets=[...])``
over the engine's process sets (:mod:`threelc.engine.process_sets`); the
:class:`~threelc.torch.async_ops.ProcessSet` objects themselves are :mod:`.async_ops`'s.

Adding and removing a set are collective over every rank of the job: every rank makes the same
calls in the same order (a set's non-members too). Sets can be added at any time after
``init()``; ``init(process_sets="dynamic")`` is accepted and changes nothing. Ids count up from
1 and are never reused while the engine runs (Horovod reuses removed ids). ``shutdown()``
forgets every set: the objects lose their ids.
"""

from __future__ import annotations

import weakref
from typing import List, Sequence

from .. import engine as _engine
from .async_ops import ProcessSet, global_process_set, refusals

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
    with refusals():
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
    with refusals():
        _engine.remove_process_set(set_id)
    return True


def process_set_list(process_sets) -> List[ProcessSet]:
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


def register_at_init(sets: Sequence[ProcessSet]) -> None:
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


def forget_process_sets() -> None:
    """At shutdown: the engine's sets are gone, and so are the objects' ids."""
    for ps in list(_registered):
        ps._invalidate()
    _registered.clear()
