"""PyTorch Lightning with the threelc DDP hook.

    import pytorch_lightning as pl
    import threelc.torch
    from threelc.torch.lightning import DDPStrategy

    trainer = pl.Trainer(accelerator="cpu", devices=4, strategy=DDPStrategy(
        ddp_comm_hook=threelc.torch.ddp_comm_hook, ddp_comm_state=threelc.torch.DDPHookState()))

Lightning's own ``pytorch_lightning.strategies.DDPStrategy`` takes the same arguments, and on
CUDA devices it registers the hook itself, so there Lightning's class works unchanged. On any
other device (the CPU, over gloo) Lightning leaves a communication hook out without a word
(pytorch_lightning 2.6: ``_register_ddp_hooks`` acts for CUDA only) and DDP's own allreduce
runs instead; this subclass registers the hook on every device and changes nothing else.

The hook's state may be made before the Trainer (before torch.distributed's group exists): it
joins the job at the hook's first call, under Lightning's own launcher as under torchrun
(:mod:`._torchrun`). Importing this module needs pytorch_lightning; ``threelc.torch`` does not.
"""

from __future__ import annotations

from pytorch_lightning.overrides.distributed import _register_ddp_comm_hook
from pytorch_lightning.strategies import DDPStrategy as LightningDDPStrategy

__all__ = ["DDPStrategy"]


class DDPStrategy(LightningDDPStrategy):
    """Lightning's DDPStrategy, whose ``ddp_comm_hook`` (with ``ddp_comm_state`` and
    ``ddp_comm_wrapper``) is registered on every device, not on CUDA devices only."""

    def _register_ddp_hooks(self) -> None:
        if self.root_device.type == "cuda":  # Lightning registers it there
            super()._register_ddp_hooks()
            return
        _register_ddp_comm_hook(model=self.model, ddp_comm_state=self._ddp_comm_state,
                                ddp_comm_hook=self._ddp_comm_hook,
                                ddp_comm_wrapper=self._ddp_comm_wrapper)
