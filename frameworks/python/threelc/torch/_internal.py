"""threelc.torch's internal API: what its modules share beyond the public names, so that no
module reaches into another's. The submissions' machinery (an allreduce with a chosen wire
compression, grouped allreduces, allgathers' and reducescatters' engine parts), the checks every
collective makes (``process_set_id``, ``check_op``, ``resolve_op``, ``group_of``), ``refusals``
(the engine's refusals as Horovod's ValueErrors) and ``init()``'s and ``shutdown()``'s process
set steps.

It stands on :mod:`.errors`, :mod:`.process_sets`, :mod:`.handles`, :mod:`.adasum` and
:mod:`._tensors`; :mod:`.async_ops`, :mod:`.ops`, :mod:`.autograd`, :mod:`.optimizer`,
:mod:`.sparse` and the package's ``__init__`` stand on it.
"""

from __future__ import annotations

import warnings
from typing import List, Optional

import torch

from .. import engine as _engine
from ..engine import Average, Sum
from . import _tensors
from .adasum import Adasum
from .errors import _refusals as refusals
from .handles import Handle
from .process_sets import ProcessSet, global_process_set
from .process_sets import _forget_process_sets as forget_process_sets
from .process_sets import _process_set_list as process_set_list
from .process_sets import _register_at_init as register_at_init

__all__ = [
    "refusals", "process_set_id", "check_op", "resolve_op", "group_of", "group_names",
    "group_handle", "allreduce_part", "submit_with_wire", "grouped_submit", "rows_input",
    "result_on_device", "allgather_parts", "process_set_list", "register_at_init",
    "forget_process_sets",
]


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


# ----------------------------------------------------------------------- grouped operations

def group_of(tensors, what: str) -> list:
    """`tensors` as a non-empty list (a grouped operation's input)."""
    if isinstance(tensors, torch.Tensor):
        raise TypeError(f"{what} takes a list of tensors, got a single tensor")
    tensors = list(tensors)
    if not tensors:
        raise ValueError(f"{what} needs at least one tensor")
    return tensors


def group_names(name: Optional[str], count: int) -> List[Optional[str]]:
    """A grouped operation's names: tensor i under ``name.i`` (unnamed: numbered by the
    engine)."""
    return [None] * count if not name else [f"{name}.{i}" for i in range(count)]


def group_handle(parts, finishes) -> Handle:
    """The handle of a grouped operation: the list of its parts' results."""
    return Handle(parts, lambda values: [f(v) for f, v in zip(finishes, values)])


# ------------------------------------------------------------------------------ allreduce

def allreduce_part(tensor: torch.Tensor, in_place: bool, name: Optional[str], op,
                   prescale_factor: float, postscale_factor: float, wire, set_id: int = 0):
    """(engine handle, finish) for one allreduce of `tensor` in process set `set_id`, with
    the engine's wire compression `wire`."""
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
    """An allreduce of `tensor` in `process_set` with the engine's wire compression `wire`
    (the optimizer's and autograd's: the public submissions travel raw)."""
    set_id = process_set_id(process_set)
    inner, finish = allreduce_part(tensor, in_place, name, op, prescale_factor,
                                   postscale_factor, wire, set_id)
    return Handle([inner], lambda values: finish(values[0]))


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
    for t, n in zip(tensors, group_names(name, len(tensors))):
        inner, finish = allreduce_part(t, in_place, n, op, prescale_factor, postscale_factor,
                                       wire, set_id)
        parts.append(inner)
        finishes.append(finish)
    return group_handle(parts, finishes)


# ------------------------------------------------------------------------------ allgather

def rows_input(tensor, what: str, reducing: bool = False):
    """(stage, numpy array, engine dtype) of a tensor whose first dimension is cut into rows."""
    _tensors.check_tensor(tensor, reducing=reducing)
    stage = _tensors.HostStage(tensor)
    if stage.host.dim() == 0:
        raise ValueError(f"{what} needs a tensor with at least one dimension (got a scalar)")
    array, dtype = _tensors.array_of(stage.host)
    return stage, array, dtype


def result_on_device(stage, dtype):
    """The finish of an operation whose result the engine returns (a numpy array)."""
    return lambda value: stage.to_device(_tensors.tensor_of(value, dtype))


def allgather_parts(tensors, names, process_set=global_process_set):
    """(engine handles, finishes) of the allgathers of `tensors` in `process_set`: every
    tensor is checked before the first is submitted."""
    set_id = process_set_id(process_set)
    staged = [rows_input(t, "allgather") for t in tensors]
    parts, finishes = [], []
    for t, n, (stage, array, dtype) in zip(tensors, names, staged):
        with refusals():
            parts.append(_engine.allgather(array, name=n, dtype=dtype, process_set=set_id))
        finishes.append(result_on_device(stage, t.dtype))
    return parts, finishes
