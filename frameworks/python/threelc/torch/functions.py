"""Horovod's helpers for starting every rank from the same state, and object collectives.

- ``broadcast_parameters(params, root_rank)``: a model's ``state_dict()`` or
  ``named_parameters()`` (any iterable of tensors or (name, tensor) pairs) overwritten in
  place with root_rank's values;
- ``broadcast_optimizer_state(optimizer, root_rank)``: root_rank's optimizer state and
  hyperparameters loaded into every rank's optimizer;
- ``broadcast_object(obj, root_rank=0, name=None)`` and ``allgather_object(obj, name=None)``:
  any picklable object (pickled, sent as a uint8 tensor, unpickled).

Each takes ``process_set=``, as Horovod's: it then runs among that set's members only (root_rank
stays a job rank, a member of the set; allgather_object returns the members' objects).
"""

from __future__ import annotations

import io
import pickle
from typing import Any, List, Optional

import numpy as np
import torch

from .. import engine as _engine
from . import ops
from .optimizer import FEEDBACK_KEY, _DistributedOptimizer


def _pairs(params):
    if isinstance(params, dict):
        return sorted(params.items())
    if isinstance(params, torch.Tensor):
        raise ValueError("broadcast_parameters takes a state_dict, named_parameters() or a list "
                         "of tensors, not a single tensor (use broadcast_)")
    try:
        items = list(params)
    except TypeError:
        raise ValueError(f"invalid params of type: {type(params).__name__}") from None
    return [p if isinstance(p, tuple) else (None, p) for p in items]


def broadcast_parameters(params, root_rank: int, process_set=ops.global_process_set) -> None:
    """Overwrites every tensor of `params` in place with root_rank's values. All broadcasts
    are submitted before the first wait, so the engine fuses and overlaps them."""
    handles = []
    for i, (name, p) in enumerate(_pairs(params)):
        if not isinstance(p, torch.Tensor):
            raise ValueError(f"parameter {name or i!r} is a {type(p).__name__}, not a tensor")
        label = f"broadcast_parameters.{name if name is not None else i}"
        handles.append(ops.broadcast_async_(p, root_rank, name=label, process_set=process_set))
    for h in handles:
        ops.synchronize(h)


def _bytes_tensor(payload: bytes) -> torch.Tensor:
    return torch.from_numpy(np.frombuffer(payload, dtype=np.uint8).copy())


def broadcast_object(obj: Any, root_rank: int = 0, name: Optional[str] = None,
                     process_set=ops.global_process_set) -> Any:
    """root_rank's `obj` on every rank (the others' `obj` is ignored); pickled on the root.
    Unlike Horovod the default name does not depend on `obj`'s type, which may differ between
    the root and the others."""
    name = name or "object"
    root = _engine.rank() == root_rank
    if root:
        payload = _bytes_tensor(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))
        length = torch.tensor([payload.numel()], dtype=torch.int64)
    else:
        length = torch.zeros(1, dtype=torch.int64)
    ops.broadcast_(length, root_rank, name=f"broadcast_object.{name}.bytes",
                   process_set=process_set)
    if not root:
        payload = torch.empty(int(length[0]), dtype=torch.uint8)
    ops.broadcast_(payload, root_rank, name=f"broadcast_object.{name}.data",
                   process_set=process_set)
    return obj if root else pickle.loads(payload.numpy().tobytes())


def allgather_object(obj: Any, name: Optional[str] = None,
                     process_set=ops.global_process_set) -> List[Any]:
    """Every rank's `obj`, in rank order (a list of size() objects)."""
    name = name or "object"
    payload = _bytes_tensor(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))
    lengths = ops.synchronize(ops.allgather_async(
        torch.tensor([payload.numel()], dtype=torch.int64),
        name=f"allgather_object.{name}.bytes", process_set=process_set))
    data = ops.synchronize(ops.allgather_async(payload, name=f"allgather_object.{name}.data",
                                               process_set=process_set)).numpy()
    out, offset = [], 0
    for n in lengths.tolist():
        out.append(pickle.loads(data[offset:offset + n].tobytes()))
        offset += n
    return out


def _create_state(optimizer: torch.optim.Optimizer, model) -> None:
    """Horovod's start for an optimizer without state yet (no step taken): every parameter
    that requires a gradient gets a zero gradient (sparse for SparseAdam, and for SGD on the
    parameters of `model`'s sparse Embeddings) and the optimizer's own step runs once, not
    DistributedOptimizer's (which would allreduce), creating its state (momentum buffers...)."""
    sparse = {id(p) for m in (model.modules() if model is not None else ())
              if isinstance(m, torch.nn.Embedding) and m.sparse for p in m.parameters()}
    for group in optimizer.param_groups:
        for p in group["params"]:
            if p.requires_grad:
                p.grad = torch.zeros_like(p)
                if isinstance(optimizer, torch.optim.SparseAdam) or \
                        (isinstance(optimizer, torch.optim.SGD) and id(p) in sparse):
                    p.grad = p.grad.to_sparse()
    cls = type(optimizer)
    if cls.__dict__.get("synchronize") is _DistributedOptimizer.synchronize:
        super(cls, optimizer).step()  # the wrapped optimizer's class
    else:
        optimizer.step()


def broadcast_optimizer_state(optimizer: torch.optim.Optimizer, root_rank: int,
                              model=None, process_set=ops.global_process_set) -> None:
    """Loads root_rank's optimizer state (per-parameter state such as momentum buffers, and
    every param group's hyperparameters such as lr) into `optimizer` on every rank.

    An optimizer that has not stepped yet gets its state first, as in Horovod: zero gradients
    for the parameters that require one, and one step of the optimizer's own (with weight
    decay this moves the parameters, alike on every rank that holds the same ones); `model`
    names the sparse Embeddings whose SGD gradients are sparse. The state travels as one
    serialized object (torch.save), loaded on the CPU and moved by ``load_state_dict`` to each
    parameter's device. Every rank's optimizer must hold the same parameters in the same
    groups.
    """
    if isinstance(optimizer, torch.optim.LBFGS):
        raise ValueError("cannot broadcast torch.optim.LBFGS state")
    if not optimizer.state:
        _create_state(optimizer, model)
    root = _engine.rank() == root_rank
    blob = None
    if root:
        buffer = io.BytesIO()
        state = optimizer.state_dict()
        state.pop(FEEDBACK_KEY, None)  # residuals are per rank: every rank keeps its own
        torch.save(state, buffer)
        blob = buffer.getvalue()
    blob = broadcast_object(blob, root_rank, name="broadcast_optimizer_state",
                            process_set=process_set)
    if not root:
        state = torch.load(io.BytesIO(blob), map_location="cpu")
        optimizer.load_state_dict(state)
