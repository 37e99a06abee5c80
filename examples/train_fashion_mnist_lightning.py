#!/usr/bin/env python3
"""Data-parallel training of a CNN on Fashion-MNIST with PyTorch Lightning and the threelc hook.

    PYTHONPATH=frameworks/python build/venv-torch2/bin/python \
        examples/train_fashion_mnist_lightning.py --devices 4 [--hook threelc|none] \
        [--sparsity S] [--amp bf16] [--epochs E] [--seed K] [--lr LR] [--max-steps N]

The Lightning twin of train_fashion_mnist.py and train_fashion_mnist_ddp.py: the same CNN (or
--model mlp / wide), per-rank batch, SGD with momentum and cosine learning-rate decay, as a
LightningModule. ``Trainer(accelerator="cpu", devices=N, strategy=DDPStrategy(...))`` starts the
other N-1 processes itself (or run it under torchrun with --devices N, N processes per node).
With --hook threelc (the default) the strategy hands DDP's gradient buckets to the threelc
engine, 3LC-compressed with error feedback:

    DDPStrategy(ddp_comm_hook=threelc.torch.ddp_comm_hook,
                ddp_comm_state=threelc.torch.DDPHookState(sparsity=...))

with DDPStrategy from threelc.torch.lightning, which registers the hook on the CPU too (Lightning's
own registers it on CUDA devices only). --hook none keeps DDP's gloo allreduce. --amp bf16 trains
with precision="bf16-mixed" (Lightning takes fp16 on the CPU as bf16).

Lightning's sampler gives each rank its share of the 60,000 training images. After training,
the test accuracy is computed over the 10,000 test images (in shards, summed over the ranks);
rank 0's last line is one JSON object: test_accuracy, steps, the engine's bytes sent per rank
and the compression ratio (the bytes an uncompressed push_pull of the gradients would have sent
over those really sent, the engine's statistics, as train_fashion_mnist.py counts them; null
with --hook none).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import pytorch_lightning as pl
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fashion_mnist import DATA_DIR, MODELS, load_split, make_model  # noqa: E402
from training import (check_training_arguments, evaluate_locally,  # noqa: E402
                      exit_without_teardown, lr_schedule, torch_threads)


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--devices", type=int, default=2, help="processes on this node (default 2)")
    ap.add_argument("--hook", choices=("threelc", "none"), default="threelc",
                    help="threelc (3LC through the engine, default) or none (DDP's gloo "
                         "allreduce)")
    ap.add_argument("--model", choices=MODELS, default="cnn")
    ap.add_argument("--sparsity", type=float, default=1.0,
                    help="3LC sparsity multiplier s in [1, 2) (default 1.0)")
    ap.add_argument("--amp", choices=("bf16",), default=None,
                    help="bf16: precision='bf16-mixed' (default: 32-true)")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--batch-size", type=int, default=64, help="per-rank batch (default 64)")
    ap.add_argument("--lr", type=float, default=None,
                    help="SGD learning rate (default: the model's, as the other examples)")
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--schedule", choices=("cosine", "constant"), default="cosine")
    ap.add_argument("--max-steps", type=int, default=0,
                    help="stop every epoch after this many steps (0: the whole epoch)")
    ap.add_argument("--threads", type=int, default=0,
                    help="torch threads per process (default: cores / devices)")
    ap.add_argument("--data-dir", type=Path, default=DATA_DIR)
    args = ap.parse_args(argv)
    if args.devices < 1:
        ap.error("--devices must be at least 1")
    check_training_arguments(ap, args)
    return args


class Classifier(pl.LightningModule):
    """The examples' model, trained with SGD and momentum, the learning rate decaying per step
    along a cosine over `total_steps` (training.lr_schedule)."""

    def __init__(self, args, total_steps: int):
        super().__init__()
        self.net = make_model(args.model)
        self.args = args
        self.total_steps = total_steps
        self.logits_dtype = None  # what the forward pass computed in (bf16 under --amp bf16)

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch, _index):
        x, y = batch
        logits = self(x)
        self.logits_dtype = str(logits.dtype).replace("torch.", "")
        loss = F.cross_entropy(logits, y)
        if not torch.isfinite(loss):
            raise SystemExit(f"loss is {loss.item()} at step {self.global_step}: diverged")
        return loss

    def configure_optimizers(self):
        optimizer = torch.optim.SGD(self.parameters(), lr=self.args.lr,
                                    momentum=self.args.momentum)
        schedule = lr_schedule(optimizer, self.args, self.total_steps)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": schedule,
                                                         "interval": "step"}}


def strategy_for(args):
    if args.hook == "none":
        from pytorch_lightning.strategies import DDPStrategy  # noqa: PLC0415

        return DDPStrategy(process_group_backend="gloo")
    import threelc.torch  # noqa: PLC0415 (the engine only with the hook)
    from threelc.torch.lightning import DDPStrategy  # noqa: PLC0415

    return DDPStrategy(process_group_backend="gloo", ddp_comm_hook=threelc.torch.ddp_comm_hook,
                       ddp_comm_state=threelc.torch.DDPHookState(sparsity=args.sparsity))


def engine_bytes(hook: str):
    """(bytes the engine sent, bytes of the float gradients it allreduced) on this rank."""
    if hook != "threelc":
        return 0, 0
    import threelc.torch  # noqa: PLC0415

    if not threelc.torch.is_initialized():  # the hook starts the engine at its first call
        raise SystemExit("the threelc hook never ran: the strategy did not register it")
    s = threelc.torch.statistics()
    return s.wire_bytes_sent, s.allreduce_bytes


def main(argv=None) -> int:
    args = parse_args(argv)
    start = time.perf_counter()
    torch_threads(args, args.devices)
    pl.seed_everything(args.seed, verbose=False)
    train_x, train_y = load_split(args.data_dir, "train")
    test_x, test_y = load_split(args.data_dir, "t10k")
    loader = DataLoader(TensorDataset(train_x, train_y), batch_size=args.batch_size,
                        shuffle=True, drop_last=True)
    # torchrun's WORLD_SIZE; Lightning's launcher starts the others with devices processes.
    world = int(os.environ.get("WORLD_SIZE", args.devices))
    steps_per_epoch = len(train_x) // world // args.batch_size
    if args.max_steps > 0:
        steps_per_epoch = min(steps_per_epoch, args.max_steps)
    model = Classifier(args, steps_per_epoch * args.epochs)
    trainer = pl.Trainer(accelerator="cpu", devices=args.devices, strategy=strategy_for(args),
                         precision="bf16-mixed" if args.amp == "bf16" else "32-true",
                         max_epochs=args.epochs, limit_train_batches=steps_per_epoch,
                         logger=False, enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False)
    train_start = time.perf_counter()
    trainer.fit(model, loader)
    train_seconds = time.perf_counter() - train_start

    rank, size = dist.get_rank(), dist.get_world_size()
    totals = evaluate_locally(model.net, test_x[rank::size], test_y[rank::size])
    sent, reduced = engine_bytes(args.hook)
    totals = torch.cat([totals, torch.tensor([float(sent), float(reduced)], dtype=torch.float64)])
    dist.all_reduce(totals)
    correct, count, test_loss, sent, reduced = totals.tolist()
    raw = reduced * 2 * (size - 1) / size  # what an uncompressed push_pull would have sent
    summary = {
        "test_accuracy": round(correct / count, 4),
        "test_loss": round(test_loss / count, 4),
        "model": args.model,
        "hook": args.hook,
        "compression_ratio": round(raw / sent, 2) if sent else None,
        "engine_mb_sent_per_rank": round(sent / size / 1e6, 3) if args.hook == "threelc"
        else None,
        "steps": trainer.global_step,
        "ranks": size,
        "epochs": args.epochs,
        "amp": args.amp,
        "precision": str(trainer.precision),  # Lightning's, as the Trainer took it
        "logits_dtype": model.logits_dtype,
        "sparsity": args.sparsity if args.hook == "threelc" else None,
        "seed": args.seed,
        "lr": args.lr,
        "train_seconds": round(train_seconds, 2),
        "seconds": round(time.perf_counter() - start, 2),
    }
    if rank == 0:
        print(json.dumps(summary), flush=True)
    dist.barrier()
    exit_without_teardown()


if __name__ == "__main__":
    sys.exit(main())
