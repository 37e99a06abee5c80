"""LocalVarianceAdamW: AdamW for 3LC-compressed data parallelism, its second moment on each
rank's own gradients.

    optimizer = hvd.DistributedOptimizer(
        threelc.torch.LocalVarianceAdamW(model.parameters(), lr=3e-3, betas=(0.9, 0.95),
                                         weight_decay=0.1),
        named_parameters=model.named_parameters())

or, under DistributedDataParallel, with the threelc hook given the optimizer::

    optimizer = threelc.torch.LocalVarianceAdamW(model.parameters(), lr=3e-3)
    model.register_comm_hook(threelc.torch.DDPHookState(preconditioner=optimizer),
                             threelc.torch.ddp_comm_hook)

Why: AdamW divides each value's step by the root of its running mean of squared gradients.
3LC hands it gradients that are exact over time (error feedback) but carry a large quantization
error at each step; that error enters the squares, so AdamW's second moment grows and its steps
shrink, most for the values whose gradients are small next to the largest of their 3LC tile
(docs/ACCURACY.md, "A transformer with AdamW"). Here the division happens before the
compression instead: every rank divides its own gradient by the root of its own running mean of
squares (``precondition_gradient``, which DistributedOptimizer or the DDP hook calls before
each allreduce); the ranks average those quotients, 3LC-compressed with error feedback;
``step()`` keeps AdamW's first moment of the average (the same on every rank), its bias
corrections and its decoupled weight decay. What the ranks exchange is then already scaled to
the step, and error feedback's exactness over time carries into the parameters as it does for
SGD with momentum.

Differences from AdamW: the second moment is each rank's (its gradient's noise is that of its
own batch, not the global one's), and the first moment averages quotients instead of
gradients. Without threelc (one process, or DDP's own allreduce) ``step()`` divides the
gradient itself. Clip with ``max_grad_norm``: each rank clips its own gradient to that norm
before dividing (torch.nn.utils.clip_grad_norm_ on the averaged quotients would shrink them
all); with it, DistributedOptimizer submits the allreduces once backward has finished and the
DDP hook once the last bucket has arrived (the norm is over every gradient of the rank), not
while backward runs. The state holds, per parameter, ``exp_avg`` (the same on every rank) and
``local_exp_avg_sq`` (this rank's): save every rank's ``state_dict()``, as with the
error-feedback residuals.
"""

from __future__ import annotations

from typing import Optional, Tuple

import torch


class LocalVarianceAdamW(torch.optim.Optimizer):
    """AdamW with a per-rank second moment applied before the gradients are averaged."""

    def __init__(self, params, lr: float = 1e-3, betas: Tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 1e-2,
                 max_grad_norm: Optional[float] = None):
        if not lr > 0:
            raise ValueError(f"lr must be > 0, got {lr}")
        if not (0.0 <= betas[0] < 1.0 and 0.0 <= betas[1] < 1.0):
            raise ValueError(f"betas must be in [0, 1), got {betas}")
        if not eps > 0:
            raise ValueError(f"eps must be > 0, got {eps}")
        if weight_decay < 0:
            raise ValueError(f"weight_decay must be >= 0, got {weight_decay}")
        if max_grad_norm is not None and not max_grad_norm > 0:
            raise ValueError(f"max_grad_norm must be > 0 or None, got {max_grad_norm}")
        # max_grad_norm lives in the groups (every group has the same), so that
        # DistributedOptimizer, which rebuilds the optimizer from its groups, keeps it.
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay, max_grad_norm=max_grad_norm))
        self._clip_factor: Optional[float] = None  # this backward pass's, once computed

    # -- before the allreduce (on each rank) --------------------------------------------------

    def _groups(self) -> list:
        """The groups, read without DistributedOptimizer's param_groups property (which
        waits for the allreduces that this division comes before)."""
        return self.__dict__["param_groups"]

    def _group_of(self, p: torch.Tensor) -> dict:
        """p's group, from an index of the groups (made again when a group was added)."""
        index = self.__dict__.get("_group_index")
        if index is None or id(p) not in index:
            index = self._group_index = {id(q): group for group in self._groups()
                                         for q in group["params"]}
        if id(p) not in index:
            raise ValueError("precondition_gradient: the tensor is not a parameter of this "
                             "optimizer")
        return index[id(p)]

    def clip_to(self, gradients) -> None:
        """Sets this backward pass's clip factor from this rank's `gradients` (all of them):
        max_grad_norm over their global norm, capped at 1. The DDP hook calls it with its
        buckets' gradients; otherwise the first division computes it from p.grad."""
        max_norm = self._groups()[0]["max_grad_norm"]
        grads = [g.detach() for g in gradients]
        norm = float(torch.linalg.vector_norm(
            torch.stack([torch.linalg.vector_norm(g.float()) for g in grads]))) \
            if grads else 0.0
        self._clip_factor = min(1.0, max_norm / norm) if max_norm and norm > 0 else 1.0

    def clips(self) -> bool:
        """Whether each rank's gradient is clipped (max_grad_norm), which needs all of them
        before the first is divided."""
        return bool(self._groups()[0]["max_grad_norm"])

    def _local_clip_factor(self) -> float:
        if self.__dict__.get("_clip_factor") is None:
            self.clip_to([p.grad for group in self._groups() for p in group["params"]
                          if p.grad is not None])
        return self._clip_factor

    @torch.no_grad()
    def precondition_gradient(self, p: torch.Tensor, grad: torch.Tensor) -> torch.Tensor:
        """`grad` (p's gradient on this rank) clipped and divided by the root of this rank's
        bias-corrected running mean of its squares, which it updates; once per parameter
        and step."""
        if grad.is_sparse:
            raise ValueError("LocalVarianceAdamW does not take sparse gradients")
        group = self._group_of(p)
        state = self.state[p]
        if state.get("preconditioned"):
            raise RuntimeError("precondition_gradient was called twice for one parameter "
                               "before step()")
        beta2, eps = group["betas"][1], group["eps"]
        second = state.get("local_exp_avg_sq")
        if second is None:
            second = state["local_exp_avg_sq"] = torch.zeros_like(p, dtype=torch.float32)
            state["local_steps"] = 0
        state["local_steps"] += 1
        g = grad.float() * self._local_clip_factor()
        second.mul_(beta2).addcmul_(g, g, value=1 - beta2)
        root = (second / (1 - beta2 ** state["local_steps"])).sqrt_().add_(eps)
        state["preconditioned"] = True
        return (g / root).to(grad.dtype)

    # -- after it ---------------------------------------------------------------------------

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            beta1 = group["betas"][0]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state.get("preconditioned"):  # no threelc allreduce divided it
                    p.grad.copy_(self.precondition_gradient(p, p.grad))
                state["preconditioned"] = False
                first = state.get("exp_avg")
                if first is None:
                    first = state["exp_avg"] = torch.zeros_like(p, dtype=torch.float32)
                    state["step"] = 0
                state["step"] += 1
                first.mul_(beta1).add_(p.grad.float(), alpha=1 - beta1)
                if group["weight_decay"]:
                    p.mul_(1 - group["lr"] * group["weight_decay"])
                p.add_((first / (1 - beta1 ** state["step"])).to(p.dtype), alpha=-group["lr"])
        self._clip_factor = None
        return loss
