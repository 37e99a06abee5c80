"""3LC for DistributedDataParallel: a communication hook.

    model = torch.nn.parallel.DistributedDataParallel(net)
    model.register_comm_hook(threelc.torch.DDPHookState(), threelc.torch.ddp_comm_hook)

DDP hands the hook one bucket of gradients at a time (a flat buffer holding several
parameters' gradients). The hook submits one engine allreduce (op Average, 3LC-compressed) per
parameter of the bucket, in place on the bucket's buffer, and returns a
``torch.futures.Future`` that one shared thread (:mod:`._completion`) completes when they have
all finished. The engine fuses the parameters' allreduces again on its own (THREELC_FUSION_*).

Why per parameter: the engine keys 3LC's error feedback by the operation's name. DDP rebuilds
its buckets after the first iteration (in the order gradients became ready), so a bucket's
index does not name the same parameters throughout training; a parameter does. Each parameter
travels as ``ddp.<name>``: its name from `named_parameters` when given, else ``b<i>.<j>`` from
the bucket index and position where the hook first saw it — the same on every rank, since DDP
builds its first buckets identically everywhere. Use one state per DDP model.

The state initializes the engine from the launcher's environment (torchrun's variables, or
torch.distributed's group, with the job secret shared through torch.distributed's store: see
:mod:`._torchrun`): when it is created if ``init_process_group`` came first, else at the hook's
first call (a Lightning strategy's state is made before the group exists).

Checkpointing: ``state.state_dict()`` holds this rank's error-feedback residuals (3LC's memory
of what it has not sent yet); ``load_state_dict`` puts them back, so a resumed job neither loses
nor double-counts them. Save one per rank, like an RNG state.
"""

import functools
from typing import Dict, List, Optional

import torch
import torch.distributed as dist

from .. import engine as _engine
from ..engine import Average
from . import _completion, _feedback, _tensors, _torchrun
from .compression import ThreelcCompressor
from .local_variance import LocalVarianceAdamW

NAME_PREFIX = "ddp."


class DDPHookState:
    """What :func:`ddp_comm_hook` needs across calls.

    `sparsity`: the 3LC sparsity multiplier s in [1, 2) (None: THREELC_SPARSITY, 1.0 by
    default). `min_compress_bytes`: parameters with fewer gradient bytes travel raw (None:
    the engine's THREELC_MIN_COMPRESS_BYTES alone decides; it applies in any case). Whether to
    compress at all follows THREELC_COMPRESSION (3LC unless ``none``). `named_parameters`: the
    DDP model's ``named_parameters()``, for readable operation names (logs, timeline,
    checkpoints); without it parameters are named by where they first appeared. `timeout`:
    seconds a bucket may take before its future fails with ETIMEOUT (None: the engine's own
    timeouts). `preconditioner`: the model's :class:`LocalVarianceAdamW`, which divides each
    gradient by this rank's second moment before it is sent (with its max_grad_norm the
    buckets are sent when the last has arrived, after clipping this rank's gradient).
    """

    def __init__(self, sparsity: Optional[float] = None,
                 min_compress_bytes: Optional[int] = None,
                 named_parameters=None, timeout: Optional[float] = None,
                 preconditioner: Optional[LocalVarianceAdamW] = None):
        if preconditioner is not None and not isinstance(preconditioner, LocalVarianceAdamW):
            raise TypeError(f"preconditioner must be a threelc.torch.LocalVarianceAdamW, got "
                            f"{type(preconditioner).__name__}")
        self.preconditioner = preconditioner
        self._waiting: List[tuple] = []  # (bucket, future) until the last bucket, to clip
        ThreelcCompressor(sparsity)  # validates the range
        if min_compress_bytes is not None and int(min_compress_bytes) < 0:
            raise ValueError(f"min_compress_bytes must be >= 0 or None, got {min_compress_bytes}")
        if timeout is not None and timeout <= 0:
            raise ValueError(f"timeout must be > 0 seconds or None, got {timeout}")
        self.sparsity = sparsity
        self.min_compress_bytes = None if min_compress_bytes is None else int(min_compress_bytes)
        self.timeout = timeout
        self._compressed = _engine.Compression.default(sparsity=sparsity)
        self._names: Dict[torch.Tensor, str] = {}
        if named_parameters is not None:
            for name, param in named_parameters:
                self._names[param] = NAME_PREFIX + name
        self._started = False
        if dist.is_available() and dist.is_initialized():
            self.start()

    def start(self) -> None:
        """Starts the engine (a no-op while it runs) and checks that it spans the processes of
        torch.distributed's group. Done when the state is created after
        ``init_process_group``, else at the hook's first call or the first load_state_dict:
        a state made before the group (a Lightning strategy's) starts it then."""
        if self._started:
            return
        _torchrun.init_engine()
        if dist.is_available() and dist.is_initialized():
            if dist.get_world_size() != _engine.size():
                raise ValueError(
                    f"torch.distributed has {dist.get_world_size()} ranks but the threelc "
                    f"engine {_engine.size()}: both must span the same processes (start the "
                    f"job with torchrun or threelcrun, once)")
        self._started = True

    def wire_for(self, nbytes: int):
        """How a gradient of `nbytes` bytes is sent: 3LC (where the engine compresses it), or
        raw below `min_compress_bytes`."""
        if self.min_compress_bytes is not None and nbytes < self.min_compress_bytes:
            return _engine.Compression.none
        return self._compressed

    # -- names -----------------------------------------------------------------------------

    def names_of(self, bucket: dist.GradBucket) -> List[str]:
        """The operation name of each parameter of `bucket`, in bucket order."""
        params = bucket.parameters()
        names = []
        for position, param in enumerate(params):
            name = self._names.get(param)
            if name is None:
                name = f"{NAME_PREFIX}b{bucket.index()}.{position}"
                self._names[param] = name
            names.append(name)
        return names

    # -- checkpointing -----------------------------------------------------------------------

    def state_dict(self) -> dict:
        """This rank's error-feedback residuals (one blob: the engine's format, which records
        the rank and job size it belongs to; None before the engine has started, when there
        are none) and the settings. Collective-free: rank 0 alone may call it."""
        return {
            "error_feedback": _feedback.save(NAME_PREFIX) if _engine.is_initialized() else None,
            "sparsity": self.sparsity,
            "min_compress_bytes": self.min_compress_bytes,
        }

    def load_state_dict(self, state: dict) -> None:
        """Restores what :meth:`state_dict` saved on this rank: the residuals of every ``ddp.``
        name are replaced by the checkpoint's. A checkpoint of another rank or job size is
        refused (ThreelcError EINVAL) and a damaged one too (EMALFORMED); nothing changes
        then. Call it between steps, not while a backward pass is running."""
        if "error_feedback" not in state:
            raise KeyError("not a DDPHookState.state_dict(): it has no 'error_feedback'")
        if state["error_feedback"] is None:  # saved before the first step: nothing to restore
            return
        self.start()
        _feedback.load(state["error_feedback"], NAME_PREFIX)


# No `from __future__ import annotations` here: DDP checks the hook's annotations as objects.
def ddp_comm_hook(state: DDPHookState,
                  bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    """Averages `bucket` over every rank through the engine's compressed allreduce; register
    with ``model.register_comm_hook(state, threelc.torch.ddp_comm_hook)``."""
    state.start()
    preconditioner = state.preconditioner
    if preconditioner is None:
        return _average(state, bucket)
    if not preconditioner.clips():
        _precondition(preconditioner, bucket)
        return _average(state, bucket)
    # Clipping needs every gradient of this rank: hold the buckets until the last one.
    future = torch.futures.Future()
    state._waiting.append((bucket, future))
    if not bucket.is_last():
        return future
    waiting, state._waiting = state._waiting, []
    preconditioner.clip_to([g for b, _ in waiting for g in b.gradients()])
    for held, held_future in waiting:
        _precondition(preconditioner, held)
        _average(state, held).then(functools.partial(_settle, held_future))
    return future


def _precondition(preconditioner: LocalVarianceAdamW, bucket: dist.GradBucket) -> None:
    """Each gradient of `bucket` divided, in place, by this rank's second moment."""
    for param, grad in zip(bucket.parameters(), bucket.gradients()):
        grad.copy_(preconditioner.precondition_gradient(param, grad))


def _settle(future: torch.futures.Future, done: torch.futures.Future) -> None:
    try:
        future.set_result(done.value())
    except Exception as e:  # noqa: BLE001 (the bucket's future fails with it)
        future.set_exception(e)


def _average(state: DDPHookState, bucket: dist.GradBucket) -> torch.futures.Future:
    """The future of `bucket` averaged in place through the engine."""
    buffer = bucket.buffer()
    _tensors.check_tensor(buffer, "the DDP bucket", reducing=True)
    if _tensors.cuda_allreduce_ready(buffer):
        return _device_bucket(state, bucket, buffer)
    stage = _tensors.HostStage(buffer)
    flat, dtype = _tensors.array_of(stage.host)
    handles = []
    # If a submission raises, the handles already submitted are dropped: the engine binding
    # keeps their buffers until those operations finish (engine.Handle).
    for name, (offset, count) in zip(state.names_of(bucket), _layout(bucket, buffer)):
        part = flat[offset:offset + count]
        wire = state.wire_for(part.nbytes)
        handles.append(_engine.allreduce(part, part, name=name, op=Average,
                                         compression=wire, dtype=dtype))
    _engine.flush()  # the bucket is all there is to negotiate now
    return _completion.when_done(handles, stage.copy_back, state.timeout,
                                 f"DDP bucket {bucket.index()}")


def _device_bucket(state: DDPHookState, bucket: dist.GradBucket, buffer: torch.Tensor):
    """The hook on a CUDA bucket: each gradient's part of the flat buffer is averaged in place
    as device memory (only 3LC blocks cross PCIe)."""
    work = _tensors.DeviceWork(buffer)
    flat = work.work.view(-1)
    handles = []
    for name, (offset, count) in zip(state.names_of(bucket), _layout(bucket, buffer)):
        part = flat[offset:offset + count]
        wire = state.wire_for(part.numel() * part.element_size())
        handles.append(_tensors.DeviceWork(part).submit(part, name=name, op=Average,
                                                        compression=wire))
    _engine.flush()
    return _completion.when_done(handles, work.copy_back, state.timeout,
                                 f"DDP bucket {bucket.index()}")


def _layout(bucket: dist.GradBucket, buffer: torch.Tensor):
    """(offset, count) in elements of each gradient of `bucket` within its flat buffer."""
    base, itemsize, total = buffer.data_ptr(), buffer.element_size(), buffer.numel()
    layout = []
    for grad in bucket.gradients():
        offset, rest = divmod(grad.data_ptr() - base, itemsize)
        if rest or offset < 0 or offset + grad.numel() > total:
            raise RuntimeError(f"DDP bucket {bucket.index()}: a gradient does not lie within "
                               f"the bucket's buffer (offset {grad.data_ptr() - base} bytes)")
        layout.append((offset, grad.numel()))
    return layout
