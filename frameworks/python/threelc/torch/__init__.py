"""threelc.torch: Horovod's PyTorch API (and BytePS's push_pull) over the threelc engine.

    import threelc.torch as hvd          # instead of: import horovod.torch as hvd
    hvd.init()
    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01 * hvd.size())
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)
    ...  # train as usual: gradients travel 3LC-compressed, averaged over the ranks

Pure Python over the engine's C ABI (ctypes), so it works with any torch from 1.13 on; CPU
tensors are passed to the engine without copies. CUDA tensors reach allreduce (and the DDP
hook) as device memory with their current stream, where libthreelc.so was built with CUDA and
sees a device; other collectives, and allreduce elsewhere, stage them through host memory.
Start the ranks with ``threelcrun -np N python train.py``.

DistributedDataParallel users add one line instead (:mod:`.ddp`)::

    model.register_comm_hook(hvd.DDPHookState(), hvd.ddp_comm_hook)

The modules: :mod:`.async_ops` (the submissions), :mod:`.handles` (Handle, poll,
synchronize), :mod:`.errors`, :mod:`.process_sets` (ProcessSet, global_process_set,
add_process_set, remove_process_set), :mod:`.adasum`, :mod:`.autograd` (the differentiable
forms), :mod:`.ops` (the synchronous collectives), :mod:`.sparse` (sparse_allreduce_async),
:mod:`.compression`, :mod:`.optimizer` (DistributedOptimizer), :mod:`.functions`
(broadcast_parameters, broadcast_optimizer_state, broadcast_object, allgather_object),
:mod:`.basics` (Horovod's build and run-time queries), :mod:`.ddp` (the DDP communication
hook); what they share beyond these names is :mod:`._internal`'s.
"""

from .. import engine as _engine
from ..engine import (Average, Max, Min, Product, Sum, ThreelcError, is_initialized,
                      statistics)
from . import _internal, _torchrun, basics
from .basics import (ccl_built, cuda_built, ddl_built, gloo_built, gloo_enabled, is_homogeneous,
                     mpi_built, mpi_enabled, mpi_threads_supported, nccl_built, rocm_built,
                     start_timeline, stop_timeline)
from .adasum import Adasum
from .compression import Compression
from .ddp import DDPHookState, ddp_comm_hook
from .local_variance import LocalVarianceAdamW
from .functions import (allgather_object, broadcast_object, broadcast_optimizer_state,
                        broadcast_parameters)
from .errors import DuplicateNameError, HorovodInternalError, InvalidArgumentError
from .handles import Handle, poll, synchronize
from .ops import (allgather, allgather_async, allreduce, allreduce_, allreduce_async,
                  allreduce_async_, alltoall, alltoall_async, barrier, broadcast, broadcast_,
                  broadcast_async, broadcast_async_, grouped_allgather, grouped_allgather_async,
                  grouped_allreduce, grouped_allreduce_, grouped_allreduce_async,
                  grouped_allreduce_async_, grouped_reducescatter, grouped_reducescatter_async,
                  join, push_pull, push_pull_, push_pull_async, push_pull_async_,
                  push_pull_async_inplace, push_pull_inplace, reducescatter, reducescatter_async)
from .optimizer import DistributedOptimizer
from .process_sets import ProcessSet, add_process_set, global_process_set, remove_process_set
from .sparse import SparseHandle, sparse_allreduce_async


def init(comm=None, process_sets=None) -> None:
    """Joins the job described by the environment (threelcrun, mpirun, srun, torchrun; under
    torchrun after ``torch.distributed.init_process_group``, whose store carries the secret).
    `process_sets`, as Horovod's: a list of :class:`ProcessSet` registered on every rank in
    order (the next ids: 1, 2, ... on a new engine; a duplicate is a ValueError, refused
    before any set is added), or "dynamic" or None (none now;
    ``add_process_set`` works either way). `comm` is Horovod's; only None is supported."""
    if comm is not None:
        raise NotImplementedError("threelc takes its ranks from the launcher's environment "
                                  "(threelcrun, mpirun, srun, torchrun), not from an MPI "
                                  "communicator: call init() without comm")
    sets = _internal.process_set_list(process_sets)
    _torchrun.init_engine()
    _internal.register_at_init(sets)


def shutdown() -> None:
    """Stops the engine; operations still pending fail with ESHUTDOWN. Every process set but
    the global one is forgotten (its object's process_set_id becomes None)."""
    _engine.shutdown()
    _internal.forget_process_sets()


def _identity(value: int) -> int:
    if value < 0:  # the engine answers -1 when it is not initialized
        raise ValueError("threelc has not been initialized; use hvd.init().")
    return value


def rank() -> int:
    """This process's rank (ValueError before init(), as Horovod)."""
    return _identity(_engine.rank())


def size() -> int:
    """The number of ranks."""
    return _identity(_engine.size())


def local_rank() -> int:
    """Rank among the ranks on this host."""
    return _identity(_engine.local_rank())


def local_size() -> int:
    """Number of ranks on this host."""
    return _identity(_engine.local_size())


def cross_rank() -> int:
    """This host's index among the hosts."""
    return _identity(_engine.cross_rank())


def cross_size() -> int:
    """Number of hosts."""
    return _identity(_engine.cross_size())


__all__ = [
    "init", "shutdown", "is_initialized", "rank", "size", "local_rank", "local_size",
    "cross_rank", "cross_size", "statistics",
    "Sum", "Average", "Min", "Max", "Product", "Adasum", "Compression", "ThreelcError",
    "HorovodInternalError", "DuplicateNameError", "InvalidArgumentError", "Handle",
    "SparseHandle", "ProcessSet",
    "global_process_set", "add_process_set", "remove_process_set",
    "allreduce", "allreduce_", "allreduce_async", "allreduce_async_",
    "grouped_allreduce", "grouped_allreduce_", "grouped_allreduce_async",
    "grouped_allreduce_async_", "sparse_allreduce_async", "allgather", "allgather_async",
    "grouped_allgather", "grouped_allgather_async", "broadcast", "broadcast_",
    "broadcast_async", "broadcast_async_", "alltoall", "alltoall_async", "reducescatter",
    "reducescatter_async", "grouped_reducescatter", "grouped_reducescatter_async", "barrier",
    "join", "poll", "synchronize",
    "push_pull", "push_pull_", "push_pull_async", "push_pull_async_", "push_pull_inplace",
    "push_pull_async_inplace",
    "DistributedOptimizer", "LocalVarianceAdamW", "DDPHookState", "ddp_comm_hook",
    "broadcast_parameters",
    "broadcast_optimizer_state",
    "broadcast_object", "allgather_object",
    "mpi_built", "gloo_built", "nccl_built", "ddl_built", "ccl_built", "cuda_built",
    "rocm_built", "mpi_enabled", "gloo_enabled", "mpi_threads_supported", "is_homogeneous",
    "start_timeline", "stop_timeline",
]
