#!/usr/bin/env python3
"""Trains a small CNN on Fashion-MNIST with 3LC-compressed gradients (the codec demo).

Every step, each parameter's gradient is compressed with ``threelc.codec.compress`` (one
block per tensor, per-tensor error-feedback buffers carried across steps), decompressed, and
the model is updated with the decoded values, so the run really trains on 3LC. While it
trains it prints the loss, the running compression ratio (raw fp32 bytes / block bytes),
bits per value and codec throughput (raw fp32 MB per second spent inside compress and
decompress); at the end the test accuracy. The last line is one JSON object.

    PYTHONPATH=frameworks/python /usr/bin/python3 tools/dev/codec_demo.py --steps 300

``--dump-gradients FILE`` also writes the raw gradients of every step (read by the C++
codec benchmark), little-endian: b"TLCGRAD1", u32 num_tensors, u32 num_steps,
num_tensors x u64 element counts, then per step, per tensor, that many fp32 values.
"""

from __future__ import annotations

import argparse
import json
import struct
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

import threelc
from threelc import codec

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
from fashion_mnist import DATA_DIR, Net, load_split  # noqa: E402


class GradientDump:
    """Writes the TLCGRAD1 file; the step count is patched in when it is closed."""

    def __init__(self, path: str, counts: list[int]):
        self.file = open(path, "wb")
        self.steps = 0
        self.file.write(b"TLCGRAD1" + struct.pack("<II", len(counts), 0))
        self.file.write(struct.pack(f"<{len(counts)}Q", *counts))

    def write(self, grads: list[np.ndarray]) -> None:
        for g in grads:
            self.file.write(np.ascontiguousarray(g, dtype="<f4").tobytes())
        self.steps += 1

    def close(self) -> None:
        self.file.seek(12)
        self.file.write(struct.pack("<I", self.steps))
        self.file.close()


class CodecStats:
    def __init__(self):
        self.values = 0
        self.block_bytes = 0
        self.encode_s = 0.0
        self.decode_s = 0.0

    def ratio(self) -> float:
        return 4 * self.values / self.block_bytes if self.block_bytes else float("nan")

    def bits_per_value(self) -> float:
        return 8 * self.block_bytes / self.values if self.values else float("nan")

    def encode_mbps(self) -> float:
        return 4 * self.values / self.encode_s / 1e6 if self.encode_s else float("nan")

    def decode_mbps(self) -> float:
        return 4 * self.values / self.decode_s / 1e6 if self.decode_s else float("nan")


def compress_gradients(params, errors, sparsity, stats: CodecStats, dump) -> None:
    """Replaces every gradient by its 3LC-decoded value (error feedback in `errors`)."""
    grads = [p.grad.detach().numpy().reshape(-1) for p in params]
    if dump is not None:
        dump.write(grads)
    for p, g, e in zip(params, grads, errors):
        t0 = time.perf_counter()
        block = codec.compress(g, e, sparsity)
        t1 = time.perf_counter()
        decoded = codec.decompress(block, g.size)
        t2 = time.perf_counter()
        stats.encode_s += t1 - t0
        stats.decode_s += t2 - t1
        stats.values += g.size
        stats.block_bytes += len(block)
        p.grad.copy_(torch.from_numpy(decoded).view_as(p.grad))


def evaluate(model, x, y, batch=1000) -> float:
    model.eval()
    correct = 0
    with torch.no_grad():
        for i in range(0, len(x), batch):
            correct += (model(x[i: i + batch]).argmax(1) == y[i: i + batch]).sum().item()
    model.train()
    return correct / len(x)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=300, help="training steps (default 300)")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.03,
                    help="SGD learning rate (default 0.03; 0.1 diverges on 3LC gradients)")
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--sparsity", type=float, default=1.0,
                    help="3LC sparsity multiplier s in [1, 2) (default 1.0)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--log-every", type=int, default=25, help="progress line every N steps")
    ap.add_argument("--no-compression", action="store_true",
                    help="train on exact gradients (baseline for comparison)")
    ap.add_argument("--data-dir", type=Path, default=DATA_DIR)
    ap.add_argument("--dump-gradients", metavar="FILE",
                    help="write every step's raw gradients to FILE (TLCGRAD1 format)")
    args = ap.parse_args(argv)
    if args.steps < 1:
        ap.error("--steps must be at least 1")
    if not 1.0 <= args.sparsity < 2.0:
        ap.error(f"--sparsity {args.sparsity} is outside [1, 2)")

    start = time.perf_counter()
    torch.set_num_threads(2)
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)

    train_x, train_y = load_split(args.data_dir, "train")
    test_x, test_y = load_split(args.data_dir, "t10k")
    model = Net(conv1=16, conv2=32, hidden=128)
    params = [p for p in model.parameters() if p.requires_grad]
    errors = [np.zeros(p.numel(), np.float32) for p in params]
    opt = torch.optim.SGD(params, lr=args.lr, momentum=args.momentum)
    dump = GradientDump(args.dump_gradients, [p.numel() for p in params]) \
        if args.dump_gradients else None

    mode = "exact gradients (no compression)" if args.no_compression else \
        f"3LC, sparsity {args.sparsity}, kernels {codec.isa()}"
    print(f"threelc {threelc.__version__}: CNN ({sum(p.numel() for p in params)} parameters in "
          f"{len(params)} tensors) on Fashion-MNIST, {args.steps} steps of {args.batch_size}, "
          f"{mode}", flush=True)

    stats = CodecStats()
    order = rng.permutation(len(train_x))
    cursor = 0
    loss_sum, loss_n = 0.0, 0
    try:
        for step in range(1, args.steps + 1):
            if cursor + args.batch_size > len(order):
                order, cursor = rng.permutation(len(train_x)), 0
            idx = torch.from_numpy(order[cursor: cursor + args.batch_size])
            cursor += args.batch_size
            opt.zero_grad(set_to_none=False)
            loss = F.cross_entropy(model(train_x[idx]), train_y[idx])
            loss.backward()
            if args.no_compression:
                if dump is not None:
                    dump.write([p.grad.detach().numpy().reshape(-1) for p in params])
            else:
                compress_gradients(params, errors, args.sparsity, stats, dump)
            opt.step()
            loss_sum += loss.item()
            loss_n += 1
            if step % args.log_every == 0 or step == args.steps:
                line = f"step {step:5d}  loss {loss_sum / loss_n:.4f}"
                if not args.no_compression:
                    line += (f"  ratio {stats.ratio():7.1f}x  {stats.bits_per_value():.3f} bits/value"
                             f"  encode {stats.encode_mbps():7.0f} MB/s"
                             f"  decode {stats.decode_mbps():7.0f} MB/s")
                print(line, flush=True)
                loss_sum, loss_n = 0.0, 0
    finally:
        if dump is not None:
            dump.close()

    accuracy = evaluate(model, test_x, test_y)
    seconds = time.perf_counter() - start
    print(f"test accuracy {accuracy:.4f} after {args.steps} steps; "
          + ("" if args.no_compression else
             f"compression {stats.ratio():.1f}x ({stats.bits_per_value():.3f} bits/value), "
             f"encode {stats.encode_mbps():.0f} MB/s, decode {stats.decode_mbps():.0f} MB/s; ")
          + f"{seconds:.1f} s", flush=True)
    if dump is not None:
        print(f"wrote {dump.steps} steps of gradients to {args.dump_gradients}", flush=True)

    def num(v: float):
        return None if v != v else round(v, 4)

    print(json.dumps({
        "test_accuracy": round(accuracy, 4),
        "compression_ratio": num(stats.ratio()),
        "bits_per_value": num(stats.bits_per_value()),
        "encode_mbps": num(stats.encode_mbps()),
        "decode_mbps": num(stats.decode_mbps()),
        "steps": args.steps,
        "seconds": round(seconds, 2),
    }), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
