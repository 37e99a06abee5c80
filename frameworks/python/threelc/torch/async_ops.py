"""The collectives as submissions, with Horovod's names, signatures and defaults: every
``*_async`` function submits to the engine and returns a :class:`Handle`; ``synchronize(handle)``
waits and returns the result (a tensor; a list for grouped operations; ``(tensor,
received_splits)`` for alltoall), ``poll(handle)`` says whether it has finished. A failed
operation raises :class:`threelc.ThreelcError` (also exported as ``HorovodInternalError``)
carrying the engine's message; a submission under a name this rank already has in flight
raises :class:`DuplicateNameError` at once (a ValueError, as in Horovod). Functions ending in
``_`` work in place. A grouped operation is its tensors' operations, submitted one after the
other once every tensor has passed the checks and waited for together. Every collective but
BytePS's push_pull takes ``process_set=`` (a registered :class:`ProcessSet`, by default
``global_process_set``) and runs among its members, in its terms.

Both :mod:`.ops` (the synchronous forms) and :mod:`.autograd` (their gradients) stand on
this module; it imports neither.
"""

from __future__ import annotations

import contextlib
import time
import warnings
from typing import Any, Callable, List, Optional, Sequence

import numpy as np
import torch

from .. import engine as _engine
from ..engine import Average, Sum, ThreelcError
from . import _tensors
from .compression import Compression, check_compressor, engine_compression

HorovodInternalError = ThreelcError  # what Horovod code catches


class DuplicateNameError(ThreelcError, ValueError):
    """A submission under a name that this rank already has in flight (the engine's
    EDUPLICATE), raised at submission. A ValueError, as Horovod raises for it, and a
    ThreelcError like every other refusal of the engine."""

    __module__ = "threelc.torch"


class InvalidArgumentError(ThreelcError, ValueError):
    """Arguments the engine refuses at submission (its EINVAL: an alltoall's splits that do
    not fit the tensor, a root rank out of range, ...). A ValueError, as Horovod raises for
    them, and a ThreelcError like every other refusal of the engine."""

    __module__ = "threelc.torch"


# The engine's submission refusals that Horovod raises as ValueError.
_REFUSALS = {_engine.EDUPLICATE: DuplicateNameError, _engine.EINVAL: InvalidArgumentError}


@contextlib.contextmanager
def refusals():
    """Around a submission to the engine: its EDUPLICATE refusal becomes DuplicateNameError,
    its EINVAL InvalidArgumentError (both ValueErrors)."""
    try:
        yield
    except ThreelcError as error:
        kind = _REFUSALS.get(error.code)
        if kind is not None and not isinstance(error, kind):
            raise kind(str(error), error.code) from None
        raise


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


def process_set_id(process_set) -> int:
    """The engine id of `process_set` (a registered :class:`ProcessSet`): TypeError for
    anything else, ValueError for a set not added yet or removed, naming it."""
    if not isinstance(process_set, ProcessSet):
        raise TypeError(f"process_set must be a threelc.torch.ProcessSet "
                        f"(hvd.global_process_set or one that hvd.add_process_set returned), "
                        f"got {process_set!r}")
    if process_set.process_set_id is None:
        raise ValueError(f"{process_set} is not a registered process set: add it with "
                         f"hvd.add_process_set() or hvd.init(process_sets=[...]) first (a "
                         f"removed set cannot be used again)")
    return process_set.process_set_id


class _AdasumOp:
    """Horovod's Adasum reduction, which threelc does not have: ``hvd.Adasum`` exists so that
    Horovod code runs up to its use, which every collective and DistributedOptimizer refuse."""

    def __repr__(self) -> str:
        return "Adasum"


Adasum = _AdasumOp()


def check_op(op):
    """`op`, unless it is Adasum (NotImplementedError, a RuntimeError, naming it)."""
    if op is Adasum:
        raise NotImplementedError("op=Adasum: threelc has no Adasum reduction (Horovod's needs "
                                  "MPI or NCCL); use Average or Sum")
    return op


def resolve_op(op, average):
    """Horovod's rules: `average` is the deprecated spelling of op; the default is Average."""
    if op is not None and average is not None:
        raise ValueError("The op parameter supersedes average. Please provide only one of them.")
    if average is not None:
        warnings.warn("Parameter `average` has been replaced with `op` and will be removed",
                      DeprecationWarning, stacklevel=3)
        return Average if average else Sum
    return Average if op is None else check_op(op)


class Handle:
    """A submitted operation: ``poll()``, ``wait(timeout=None)`` (= ``synchronize``)."""

    __slots__ = ("_parts", "_finish", "_done", "_value", "__weakref__")

    def __init__(self, parts: Sequence["_engine.Handle"], finish: Callable[[list], Any]):
        self._parts = list(parts)
        self._finish = finish
        self._done = False
        self._value = None

    def poll(self) -> bool:
        return self._done or all(p.poll() for p in self._parts)

    def wait(self, timeout: Optional[float] = None):
        if not self._done:
            deadline = None if timeout is None else time.monotonic() + max(0.0, timeout)
            values = [p.wait(None if deadline is None else max(0.0, deadline - time.monotonic()))
                      for p in self._parts]  # raises ThreelcError
            self._value = self._finish(values)
            self._done = True
            self._finish = None
        return self._value

    def __repr__(self) -> str:
        inner = ", ".join(repr(p) for p in self._parts)
        return f"<threelc.torch.Handle [{inner}]>"


def poll(handle: Handle) -> bool:
    """True once the operation of `handle` has finished (synchronize then does not block)."""
    return handle.poll()


def synchronize(handle: Handle, timeout: Optional[float] = None):
    """Waits for `handle` and returns the operation's output; raises ThreelcError when it
    failed. `timeout` (seconds; None waits for ever) raises ThreelcError ETIMEOUT."""
    if not isinstance(handle, Handle):
        raise TypeError(f"synchronize() takes a threelc.torch handle, got {handle!r}")
    return handle.wait(timeout)


# ------------------------------------------------------------------------------ allreduce

def _allreduce_submit(tensor: torch.Tensor, in_place: bool, name: Optional[str], op,
                      prescale_factor: float, postscale_factor: float, wire,
                      set_id: int = 0):
    """(engine handle, finish) for one allreduce of `tensor` in process set `set_id`."""
    _tensors.check_tensor(tensor, reducing=True)
    if _tensors.cuda_allreduce_ready(tensor):
        work = _tensors.DeviceWork(tensor)
        out = work.work if in_place else torch.empty_like(work.work)
        with refusals():
            inner = work.submit(out, name=name, op=op, prescale=prescale_factor,
                                postscale=postscale_factor, compression=wire,
                                process_set=set_id)
        return inner, (lambda _value: work.copy_back()) if in_place else (lambda _value: out)
    stage = _tensors.HostStage(tensor)
    out = stage.host if in_place else torch.empty_like(stage.host)
    array, dtype = _tensors.array_of(stage.host)
    output = array if in_place else _tensors.array_of(out)[0]
    with refusals():
        inner = _engine.allreduce(array, output, name=name, op=op, prescale=prescale_factor,
                                  postscale=postscale_factor, compression=wire, dtype=dtype,
                                  process_set=set_id)
    keep = (tensor, out)  # the engine writes into `out` until the handle completes

    def finish(_value) -> torch.Tensor:
        assert keep  # holds the tensors until here
        return stage.copy_back() if in_place else stage.to_device(out)

    return inner, finish


def submit_with_wire(tensor, in_place, name, op, prescale_factor, postscale_factor, wire,
                     process_set=global_process_set) -> Handle:
    set_id = process_set_id(process_set)
    inner, finish = _allreduce_submit(tensor, in_place, name, op, prescale_factor,
                                      postscale_factor, wire, set_id)
    return Handle([inner], lambda values: finish(values[0]))


def _allreduce_async(tensor, in_place, average, name, op, prescale_factor, postscale_factor,
                     process_set) -> Handle:
    return submit_with_wire(tensor, in_place, name, resolve_op(op, average), prescale_factor,
                            postscale_factor, _engine.Compression.none,
                            process_set=process_set)


def allreduce_async(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                    postscale_factor=1.0, process_set=global_process_set) -> Handle:
    """Submits an allreduce of `tensor` (not modified) into a new tensor; the result comes from
    ``synchronize``. `op` defaults to Average; `prescale_factor` multiplies every rank's input,
    `postscale_factor` the result. The tensor travels raw (exact): use ``allreduce(...,
    compression=Compression.threelc)`` or DistributedOptimizer for 3LC."""
    return _allreduce_async(tensor, False, average, name, op, prescale_factor,
                            postscale_factor, process_set)


def allreduce_async_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                     postscale_factor=1.0, process_set=global_process_set) -> Handle:
    """In-place allreduce_async: `tensor` receives the result."""
    return _allreduce_async(tensor, True, average, name, op, prescale_factor,
                            postscale_factor, process_set)


# ---------------------------------------------------------------------- grouped allreduce

def _group_names(name: Optional[str], count: int) -> List[Optional[str]]:
    return [None] * count if not name else [f"{name}.{i}" for i in range(count)]


def group_of(tensors, what: str) -> list:
    """`tensors` as a non-empty list (a grouped operation's input)."""
    if isinstance(tensors, torch.Tensor):
        raise TypeError(f"{what} takes a list of tensors, got a single tensor")
    tensors = list(tensors)
    if not tensors:
        raise ValueError(f"{what} needs at least one tensor")
    return tensors


def _group_handle(parts, finishes) -> Handle:
    return Handle(parts, lambda values: [f(v) for f, v in zip(finishes, values)])


def grouped_submit(tensors, in_place, average, name, op, prescale_factor, postscale_factor,
                   wire, process_set=global_process_set) -> Handle:
    """The group's allreduces, submitted one after the other once every tensor has passed
    the checks (the engine has no group of its own: it fuses what arrives in one cycle)."""
    set_id = process_set_id(process_set)
    tensors = group_of(tensors, "grouped allreduce")
    for t in tensors:
        _tensors.check_tensor(t, reducing=True)
    op = resolve_op(op, average)
    parts, finishes = [], []
    for t, n in zip(tensors, _group_names(name, len(tensors))):
        inner, finish = _allreduce_submit(t, in_place, n, op, prescale_factor, postscale_factor,
                                          wire, set_id=set_id)
        parts.append(inner)
        finishes.append(finish)
    return _group_handle(parts, finishes)


def grouped_allreduce_async(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                            postscale_factor=1.0, process_set=global_process_set) -> Handle:
    """Submits the allreduce of every tensor in `tensors` together (fused by the engine);
    ``synchronize`` returns the list of new tensors."""
    return grouped_submit(tensors, False, average, name, op, prescale_factor, postscale_factor,
                          _engine.Compression.none, process_set)


def grouped_allreduce_async_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                             postscale_factor=1.0, process_set=global_process_set) -> Handle:
    """In-place grouped_allreduce_async."""
    return grouped_submit(tensors, True, average, name, op, prescale_factor, postscale_factor,
                          _engine.Compression.none, process_set)


# ----------------------------------------------------------------------- BytePS push_pull

def _push_pull_async(tensor, in_place, average, name, compression) -> Handle:
    """BytePS's push_pull is the engine's allreduce (threelc_push_pull is the same operation
    under the paper's name), in the global set."""
    check_compressor(compression)
    compressed, ctx = compression.compress(tensor)
    inner, finish = _allreduce_submit(compressed, in_place, name, Average if average else Sum,
                                      1.0, 1.0, engine_compression(compression))

    def done(values):
        result = compression.decompress(finish(values[0]), ctx)
        if in_place and result is not tensor:  # a compressor that made a new tensor (fp16)
            with torch.no_grad():
                tensor.copy_(result)
            return tensor
        return result

    return Handle([inner], done)


def push_pull_async(tensor, average=True, name=None, version=0, priority=0,
                    compression=Compression.none) -> Handle:
    """BytePS's push_pull_async: the sum (average=True: the mean) of `tensor` over every rank
    into a new tensor (``synchronize`` returns it). `version` and `priority` are accepted for
    BytePS compatibility and ignored (the engine orders by arrival)."""
    return _push_pull_async(tensor, False, average, name, compression)


def push_pull_async_(tensor, average=True, name=None, version=0, priority=0,
                     compression=Compression.none) -> Handle:
    """In-place push_pull_async (BytePS's push_pull_async_inplace)."""
    return _push_pull_async(tensor, True, average, name, compression)


push_pull_async_inplace = push_pull_async_


# ------------------------------------------------------------------------------ allgather

def _rows_input(tensor, what: str, reducing: bool = False):
    """(stage, numpy array, engine dtype) of a tensor whose first dimension is cut into rows."""
    _tensors.check_tensor(tensor, reducing=reducing)
    stage = _tensors.HostStage(tensor)
    if stage.host.dim() == 0:
        raise ValueError(f"{what} needs a tensor with at least one dimension (got a scalar)")
    array, dtype = _tensors.array_of(stage.host)
    return stage, array, dtype


def _result_on_device(stage, dtype):
    """The finish of an operation whose result the engine returns (a numpy array)."""
    return lambda value: stage.to_device(_tensors.tensor_of(value, dtype))


def allgather_parts(tensors, names, process_set=global_process_set):
    """(engine handles, finishes) of the allgathers of `tensors` in `process_set`: every
    tensor is checked before the first is submitted."""
    set_id = process_set_id(process_set)
    staged = [_rows_input(t, "allgather") for t in tensors]
    parts, finishes = [], []
    for t, n, (stage, array, dtype) in zip(tensors, names, staged):
        with refusals():
            parts.append(_engine.allgather(
                array, name=n, dtype=dtype, process_set=set_id))
        finishes.append(_result_on_device(stage, t.dtype))
    return parts, finishes


def allgather_async(tensor, name=None, process_set=global_process_set) -> Handle:
    """Submits an allgather: every rank's `tensor` concatenated along the first dimension
    (which may differ between ranks), in rank order (of the set's members)."""
    parts, finishes = allgather_parts([tensor], [name], process_set)
    return Handle(parts, lambda values: finishes[0](values[0]))


def grouped_allgather_async(tensors, name=None, process_set=global_process_set) -> Handle:
    """Submits the allgather of every tensor in `tensors` (tensor i under ``name.i``; unnamed:
    numbered by the engine), one after the other once all have passed the checks;
    ``synchronize`` returns the list of gathered tensors."""
    process_set_id(process_set)
    tensors = group_of(tensors, "grouped allgather")
    return _group_handle(*allgather_parts(tensors, _group_names(name, len(tensors)),
                                          process_set))


# ------------------------------------------------------------------------------ broadcast

def _broadcast_submit(tensor, root_rank, name, in_place, process_set) -> Handle:
    set_id = process_set_id(process_set)
    _tensors.check_tensor(tensor)
    stage = _tensors.HostStage(tensor)
    out = stage.host if in_place else torch.empty_like(stage.host)
    array, dtype = _tensors.array_of(stage.host)
    output = array if in_place else _tensors.array_of(out)[0]
    with refusals():
        inner = _engine.broadcast(array, int(root_rank), output,
                                  name=name, dtype=dtype, process_set=set_id)
    if in_place:
        return Handle([inner], lambda values: stage.copy_back())
    return Handle([inner], lambda values: stage.to_device(out))


def broadcast_async(tensor, root_rank, name=None, process_set=global_process_set) -> Handle:
    """Submits a broadcast of root_rank's `tensor` into a new tensor on every rank (of
    `process_set`; root_rank is a job rank, a member of it)."""
    return _broadcast_submit(tensor, root_rank, name, False, process_set)


def broadcast_async_(tensor, root_rank, name=None, process_set=global_process_set) -> Handle:
    """In-place broadcast_async: `tensor` receives root_rank's values."""
    return _broadcast_submit(tensor, root_rank, name, True, process_set)


# ------------------------------------------------------------------------------- alltoall

def _splits_array(splits) -> Optional[np.ndarray]:
    if splits is None:
        return None
    if isinstance(splits, torch.Tensor):
        if splits.is_floating_point() or splits.is_complex() or splits.dtype == torch.bool:
            raise ValueError(f"alltoall: splits must hold integers (Horovod's are int32), got a "
                             f"tensor of {splits.dtype}")
        splits = splits.detach().cpu().numpy()
    array = np.asarray(splits)
    if array.size and array.dtype.kind not in "iu":
        raise ValueError(f"alltoall: splits must hold integers, got {array.dtype} values")
    return np.ascontiguousarray(array, dtype=np.int64)


def alltoall_async(tensor, splits=None, name=None, process_set=global_process_set) -> Handle:
    """Submits an alltoall: rows ``splits[j]`` of `tensor`'s first dimension go to rank j
    (None: size() equal parts). ``synchronize`` returns ``(received rows in rank order,
    received_splits as an int32 tensor)``."""
    set_id = process_set_id(process_set)
    stage, array, dtype = _rows_input(tensor, "alltoall")
    with refusals():
        inner = _engine.alltoall(array, _splits_array(splits),
                                 name=name, dtype=dtype, process_set=set_id)

    def finish(values):
        data, received = values[0]
        return (stage.to_device(_tensors.tensor_of(data, tensor.dtype)),
                torch.from_numpy(received.astype(np.int32)))

    return Handle([inner], finish)


# -------------------------------------------------------------------------- reducescatter

def reducescatter_parts(tensors, names, op, prescale_factor, postscale_factor,
                        process_set=global_process_set):
    """(engine handles, finishes) of the reducescatters of `tensors` in `process_set`, all
    checked first."""
    set_id = process_set_id(process_set)
    check_op(op)
    staged = [_rows_input(t, "reducescatter", reducing=True) for t in tensors]
    parts, finishes = [], []
    for t, n, (stage, array, dtype) in zip(tensors, names, staged):
        with refusals():
            parts.append(_engine.reducescatter(array, name=n, op=op, prescale=prescale_factor,
                                               postscale=postscale_factor, dtype=dtype,
                                               process_set=set_id))
        finishes.append(_result_on_device(stage, t.dtype))
    return parts, finishes


def reducescatter_async(tensor, name=None, op=Average, process_set=global_process_set,
                        prescale_factor=1.0, postscale_factor=1.0) -> Handle:
    """Submits a reducescatter: this rank's part of the reduction (default Average) of
    `tensor`; the first dimension is cut into size() parts, the first dim0 % size() ranks
    getting one row more."""
    parts, finishes = reducescatter_parts([tensor], [name], op, prescale_factor,
                                           postscale_factor, process_set)
    return Handle(parts, lambda values: finishes[0](values[0]))


def grouped_reducescatter_async(tensors, name=None, op=Average, process_set=global_process_set,
                                prescale_factor=1.0, postscale_factor=1.0) -> Handle:
    """Submits the reducescatter of every tensor in `tensors` (as grouped_allgather_async
    does); ``synchronize`` returns the list of this rank's parts."""
    process_set_id(process_set)
    tensors = group_of(tensors, "grouped reducescatter")
    return _group_handle(*reducescatter_parts(tensors, _group_names(name, len(tensors)), op,
                                               prescale_factor, postscale_factor, process_set))
