"""DistributedOptimizer: Horovod's wrapper that allreduces gradients as backward produces them.

``hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())`` returns an
optimizer of the same class whose ``step()`` first waits for the gradients' allreduces. Each
parameter's allreduce is submitted from a hook the moment its gradient has been accumulated,
so communication overlaps the rest of the backward pass; the engine fuses what arrives in the
same cycle. With ``backward_passes_per_step=k`` the gradients of k backward passes are summed
locally and allreduced once.

Gradients travel under the name ``allreduce.<parameter name>``, which is also the key of the
engine's 3LC error feedback: give every rank the same names (``named_parameters``) and keep
them across steps. Without ``named_parameters`` the names are Horovod's
``allreduce.noname.<group>.<index>`` (``_parameter_names``, as in Horovod). A sparse gradient
(an ``Embedding(sparse=True)``'s) is reduced as Horovod does: by ``sparse_allreduce_async``
(allgathers of its indices and values, uncompressed), or with ``sparse_as_dense=True`` as a
dense copy through the allreduce; either way p.grad stays sparse.

Differences from Horovod: ``compression`` defaults to ``Compression.default`` (3LC unless
THREELC_COMPRESSION=none), since sending gradients compressed is what threelc is for;
``num_groups`` and ``groups`` are accepted but fusion is left to the engine
(THREELC_FUSION_THRESHOLD, THREELC_CYCLE_TIME_MS); ``state_dict()`` also holds this rank's
error-feedback residuals
(``load_state_dict`` restores them), so a job resumed from a checkpoint continues as if it had
not stopped. With a ``process_set`` the residuals are those of the set's operations
(``process_set.<id>/allreduce.<name>``), which removing the set drops.

Mixed precision: with a ``torch.amp.GradScaler``, ``scaler.scale(loss).backward()`` then
``scaler.step(optimizer)`` works as with a local optimizer: the scaler's first read of
``param_groups`` waits for the allreduces, so it unscales and checks the averaged gradients,
which are the same on every rank (inf and NaN reach every rank: 3LC sends a block holding them
raw), and every rank skips an overflowing step alike. Horovod's form (``synchronize()``,
``scaler.unscale_()``, ``scaler.step()`` under ``skip_synchronize()``) works too.
"""

from __future__ import annotations

import contextlib
import functools
import warnings
import weakref
from typing import Dict, List, Optional, Tuple

import torch

from .. import engine as _engine
from ..engine import Average
from . import _feedback, _internal
from .compression import Compression, check_compressor, engine_compression
from .handles import Handle, synchronize
from .process_sets import global_process_set
from .sparse import sparse_allreduce_async


NAME_PREFIX = "allreduce."  # of every gradient's operation name
FEEDBACK_KEY = "threelc_error_feedback"  # of the residuals in state_dict()


def _remove_hooks(handles) -> None:
    for handle in handles:
        handle.remove()


class _DistributedOptimizer(torch.optim.Optimizer):
    """Mixed into the wrapped optimizer's class by DistributedOptimizer()."""

    def __init__(self, params, named_parameters, compression, backward_passes_per_step, op,
                 gradient_predivide_factor, sparse_as_dense, process_set):
        super(self.__class__, self).__init__(params)
        self.process_set = process_set  # Horovod's attribute
        self._feedback_prefix = _feedback_prefix(process_set)
        # Outside its set the optimizer steps on the local gradients, as in Horovod.
        self._member = process_set is global_process_set or process_set.included()
        self._compression = compression
        self._wire = engine_compression(compression)
        self._op = op
        self._sparse_as_dense = sparse_as_dense
        self.backward_passes_per_step = backward_passes_per_step
        if op == Average:
            # The engine divides by size() after the sum; the factor splits that division.
            self._prescale = 1.0 / gradient_predivide_factor
            self._postscale = gradient_predivide_factor
        else:
            self._prescale = self._postscale = 1.0
        # Horovod's attribute: parameter -> its name, "allreduce.noname.<group>.<index>"
        # without named_parameters; the gradient travels as "allreduce.<name>" (unnamed
        # ones as their name, which has the prefix).
        self._parameter_names = _horovod_names(self.param_groups, named_parameters)
        self._wire_names = {p: n if named_parameters is None else NAME_PREFIX + n
                            for p, n in self._parameter_names.items()}
        self._params: List[torch.Tensor] = [p for group in self.param_groups
                                            for p in group["params"] if p.requires_grad]
        self._delay: Dict[torch.Tensor, int] = {p: backward_passes_per_step for p in self._params}
        self._handles: Dict[torch.Tensor, Tuple[Optional[Handle], object]] = {}
        self._hooks: list = []
        self._synchronized = False
        self._synchronized_for_groups = False  # by a read of param_groups (GradScaler)
        self._should_synchronize = True
        # A LocalVarianceAdamW divides each gradient before its allreduce; with max_grad_norm
        # that needs every gradient of the backward pass, so synchronize() submits them all.
        self._precondition = getattr(self, "precondition_gradient", None)
        self._submit_in_backward = self._precondition is None or not self.clips()
        if self._member:
            self._register_hooks()

    # -- GradScaler ---------------------------------------------------------------------------

    @property
    def param_groups(self):
        """The wrapped optimizer's groups. Read while gradients' allreduces are in flight, as
        ``GradScaler.step()`` and ``unscale_()`` read them right after backward, it first
        waits for them: what the reader then sees, and checks for inf and NaN, is the averaged
        gradient, the same on every rank (and ``step()`` does not allreduce again)."""
        handles = self.__dict__.get("_handles")
        if handles and any(handle is not None for handle, _ in handles.values()):
            self.synchronize()
            self._synchronized_for_groups = True
        return self.__dict__["param_groups"]

    @param_groups.setter
    def param_groups(self, groups) -> None:
        self.__dict__["param_groups"] = groups

    # -- hooks -----------------------------------------------------------------------------

    def _register_hooks(self) -> None:
        for p in self._params:
            if hasattr(p, "register_post_accumulate_grad_hook"):  # torch >= 2.1
                self._hooks.append(p.register_post_accumulate_grad_hook(self._make_hook(p)))
            else:
                # The gradient accumulator of a leaf: its hooks run once p.grad is updated.
                accumulator = p.expand_as(p).grad_fn.next_functions[0][0]
                accumulator.register_hook(self._make_hook(p))
                self._hooks.append(accumulator)  # keep it alive
        # A parameter keeps its post-accumulate hooks: once this optimizer is gone they go too,
        # so that a model wrapped again is not allreduced by a discarded wrapper as well.
        removable = [h for h in self._hooks if hasattr(h, "remove")]
        weakref.finalize(self, _remove_hooks, removable)

    def _make_hook(self, p: torch.Tensor):
        owner = weakref.ref(self)  # the hook must not keep the optimizer alive

        def hook(*_ignored):
            self = owner()
            if self is None:  # the optimizer was discarded; its hook is being removed
                return
            if p in self._handles and self._handles[p][0] is not None and self._delay[p] <= 0:
                raise AssertionError(
                    "Gradients were computed more than backward_passes_per_step times before "
                    "call to step(). Increase backward_passes_per_step to accumulate gradients "
                    "locally.")
            handle, ctx = None, None
            self._synchronized_for_groups = False  # a new backward pass
            self._delay[p] -= 1
            if self._delay[p] == 0 and self._submit_in_backward:
                handle, ctx = self._allreduce_grad_async(p)
            self._handles[p] = (handle, ctx)

        return hook

    def _allreduce_grad_async(self, p: torch.Tensor):
        """(handle, write) for p's gradient: ``write(output)`` puts the result into p.grad."""
        if p.grad is None:  # a parameter this backward pass did not reach
            p.grad = torch.zeros_like(p)
        name = self._wire_names[p]
        if p.grad.is_sparse and not self._sparse_as_dense:
            # allgathers of indices and values (no compression, no pre/postscale: Horovod's)
            return sparse_allreduce_async(p.grad, name, self._op, self.process_set), \
                functools.partial(_write_grad, p, Compression.none, None)
        dense = p.grad.to_dense() if p.grad.is_sparse else p.grad
        if self._precondition is not None:
            dense = self._precondition(p, dense)
        compressed, ctx = self._compression.compress(dense)
        handle = _internal.submit_with_wire(compressed, True, name, self._op, self._prescale,
                                            self._postscale, self._wire,
                                            process_set=self.process_set)
        return handle, functools.partial(_write_grad, p, self._compression, ctx)

    # -- the Horovod interface ---------------------------------------------------------------

    def synchronize(self) -> None:
        """Waits for every gradient's allreduce (submitting those no hook submitted, e.g. of
        parameters the backward pass did not reach) and writes the results into p.grad.
        After a read of ``param_groups`` has done so for this backward pass, it does nothing:
        the gradients are averaged once. On a rank outside the optimizer's process set it
        does nothing (the gradients stay local, as in Horovod)."""
        if self._synchronized_for_groups or not self._member:
            self._synchronized = True
            return
        for p in self._params:
            if p not in self._handles or self._handles[p][0] is None:
                self._handles[p] = self._allreduce_grad_async(p)
        if self._handles:
            _engine.flush()  # every gradient is submitted: nothing more to wait for
        first_error = None
        for p, (handle, write) in self._handles.items():
            try:
                output = synchronize(handle)
            except Exception as e:  # noqa: BLE001 (wait for the others, then raise the first)
                first_error = first_error or e
                continue
            finally:
                self._delay[p] = self.backward_passes_per_step
            write(output)
        self._handles.clear()
        self._synchronized = True
        if first_error is not None:
            raise first_error

    @contextlib.contextmanager
    def skip_synchronize(self):
        """``step()`` inside this context does not synchronize (after an explicit
        ``synchronize()``, e.g. to clip the averaged gradients)."""
        self._should_synchronize = False
        try:
            yield
        finally:
            self._should_synchronize = True

    def step(self, closure=None):
        if self._should_synchronize and not self._synchronized_for_groups:
            if self._synchronized:
                warnings.warn("optimizer.step() called without optimizer.skip_synchronize() "
                              "context after optimizer.synchronize(). This can cause training "
                              "slowdown. You may want to consider using "
                              "optimizer.skip_synchronize() context if you use "
                              "optimizer.synchronize() in your code.")
            self.synchronize()
        self._synchronized = False
        self._synchronized_for_groups = False
        return super(self.__class__, self).step(closure)

    def state_dict(self):
        """The wrapped optimizer's state_dict, plus this rank's 3LC error-feedback residuals
        of the gradients' allreduces (under ``"threelc_error_feedback"``; per rank: save
        every rank's, like an RNG state)."""
        state = super(self.__class__, self).state_dict()
        if _engine.is_initialized():  # otherwise there are no residuals to keep
            state[FEEDBACK_KEY] = _feedback.save(self._feedback_prefix)
        return state

    def load_state_dict(self, state_dict):
        """Loads the wrapped optimizer's state and, when the checkpoint has them, this rank's
        error-feedback residuals (replacing every ``allreduce.`` residual of the engine; a
        checkpoint of another rank or job size is refused before anything changes)."""
        blob = state_dict.get(FEEDBACK_KEY)
        if blob is not None:
            _feedback.load(blob, self._feedback_prefix)
            state_dict = {k: v for k, v in state_dict.items() if k != FEEDBACK_KEY}
        return super(self.__class__, self).load_state_dict(state_dict)

    def zero_grad(self, *args, **kwargs):
        if self._handles:
            raise AssertionError("optimizer.zero_grad() was called after loss.backward() but "
                                 "before optimizer.step() or optimizer.synchronize(). This is "
                                 "prohibited as it can cause a race condition.")
        return super(self.__class__, self).zero_grad(*args, **kwargs)


def _write_grad(p: torch.Tensor, compression, ctx, output: torch.Tensor) -> None:
    """The reduced gradient `output` into p.grad, which stays the same tensor; a sparse
    p.grad stays sparse (sparse_as_dense reduced a dense copy of it)."""
    result = compression.decompress(output, ctx)
    with torch.no_grad():
        if p.grad.is_sparse:
            p.grad.zero_().add_(result if result.is_sparse else
                                 result.to_sparse(p.grad.sparse_dim()))
        elif result is not p.grad:
            p.grad.copy_(result)


def _feedback_prefix(process_set) -> str:
    """Where the engine keeps the residuals of this optimizer's gradients: the names under
    ``allreduce.``, in its process set's part of the store (docs/WIRE_FORMAT.md)."""
    set_id = _internal.process_set_id(process_set)
    return NAME_PREFIX if set_id == 0 else f"process_set.{set_id}/{NAME_PREFIX}"


def _horovod_names(param_groups, named_parameters) -> Dict[torch.Tensor, str]:
    """Horovod's _parameter_names: the given names (unique, every parameter of the groups
    named: else ValueError), or "allreduce.noname.<group>.<index>" without named_parameters."""
    if named_parameters is None:
        return {p: f"{NAME_PREFIX}noname.{g}.{i}" for g, group in enumerate(param_groups)
                for i, p in enumerate(group["params"])}
    named = list(named_parameters)
    if any(not (isinstance(x, tuple) and len(x) == 2) for x in named):
        raise ValueError("named_parameters should be a sequence of tuples (name, parameter), "
                         "usually produced by model.named_parameters()")
    names = [n for n, _ in named]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"Parameter names in named_parameters must be unique. Found "
                         f"duplicates: {', '.join(duplicates)}")
    by_param = {p: n for n, p in named}
    unnamed = [p for group in param_groups for p in group["params"] if p not in by_param]
    if unnamed:
        raise ValueError(f"named_parameters was specified, but {len(unnamed)} model "
                         f"parameter(s) were not named (shapes "
                         f"{[tuple(p.shape) for p in unnamed][:5]}). Python object ids: "
                         f"{', '.join(str(id(p)) for p in unnamed[:5])}")
    return by_param


def DistributedOptimizer(optimizer, named_parameters=None, compression=Compression.default,
                         backward_passes_per_step=1, op=Average, gradient_predivide_factor=1.0,
                         num_groups=0, groups=None, sparse_as_dense=False,
                         process_set=global_process_set):
    """Wraps `optimizer` so that ``step()`` applies gradients averaged (op) over every rank.

    `named_parameters`: ``model.named_parameters()`` (names key the allreduces and their 3LC
    error feedback). `compression`: ``Compression.default`` (THREELC_COMPRESSION: 3LC unless
    ``none``), ``Compression.threelc(sparsity=s)``, ``Compression.none`` or
    ``Compression.fp16``. `backward_passes_per_step`: local accumulation before each
    allreduce. `gradient_predivide_factor`: with op=Average, divide by this before the sum and
    by size()/factor after it. `num_groups`/`groups`: accepted, fusion is the engine's.
    `process_set`: gradients are averaged over its members only (size() is the set's); on a
    rank outside it the optimizer steps on the local gradients, as in Horovod.
    """
    _internal.process_set_id(process_set)
    check_compressor(compression)
    if int(backward_passes_per_step) < 1:
        raise ValueError(f"backward_passes_per_step must be >= 1, got {backward_passes_per_step}")
    _internal.check_op(op)
    if gradient_predivide_factor != 1.0 and op != Average:
        raise ValueError("gradient_predivide_factor not supported with op != Average")
    if gradient_predivide_factor <= 0:
        raise ValueError(f"gradient_predivide_factor must be > 0, got {gradient_predivide_factor}")
    if num_groups and groups is not None:
        raise ValueError("Pass either num_groups or groups, not both")
    members = {k: v for k, v in _DistributedOptimizer.__dict__.items()
               if k not in ("__dict__", "__weakref__")}
    cls = type(optimizer.__class__.__name__, (optimizer.__class__,), members)
    wrapped = cls(optimizer.param_groups, named_parameters, compression,
                  int(backward_passes_per_step), op, float(gradient_predivide_factor),
                  sparse_as_dense, process_set)
    if optimizer.state:
        wrapped.load_state_dict(optimizer.state_dict())
    return wrapped
