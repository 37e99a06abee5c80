#!/usr/bin/env python3
"""A one-process model of data-parallel training through push_pull, for splitting 3LC's
accuracy loss into its parts.

    /usr/bin/python3 tools/eval/accuracy/fidelity_model.py --ranks 4 --lr 0.05 --epochs 1 \
        [--push 3lc|exact] [--pull 3lc|exact] [--sparsity S] [--scale-values N] \
        [--momentum-correction] [--seed K]

It trains the README's CNN on Fashion-MNIST exactly as examples/train_fashion_mnist.py does
(same model, shards, data order, SGD with momentum, cosine schedule), but simulates the ranks
in one process: each step computes every rank's gradient on its own batch, then combines them
as push_pull does. The compressed tensors (those of at least THREELC_MIN_COMPRESS_BYTES, in the
order backward produces them) are fused into one buffer, cut into one segment per rank and
each segment into blocks (one per tensor piece). Every rank quantizes each block of the other
ranks' segments with its own push residual (push); the owner adds the decoded blocks to its
exact values and quantizes the sum with its pull residual (pull); the result is that
quantized sum over the ranks. The quantizer is the codec's (docs/WIRE_FORMAT.md): a = x + e,
M = max |a| over the scale group, scale = M * s, send sign(a) * scale where |a| > scale / 2.

Knobs that take one part away or change it:
  --push exact / --pull exact   that quantization is skipped (exact values, no residual);
  --scale-values N              one scale per N values inside a block instead of one a block
                                (N = 20480 is one per codec tile);
  --pull-scale-values N         the same for the pull alone;
  --small-scale-values N        N values per scale in the blocks of tensors of fewer than
                                --small-tensor-values values;
  --min-compress-values V       tensors of fewer than V values are sent exact;
  --sparsity S                  the multiplier s (below 1 sends more: threshold M*s/2);
  --pull-sparsity S             s of the pull alone;
  --momentum-correction         compress the momentum-corrected update (Deep Gradient
                                Compression): each rank keeps its own velocity v = m v + g and
                                push_pull carries v; the optimizer then runs without momentum.

    /usr/bin/python3 tools/eval/accuracy/fidelity_model.py --table RESULTS.jsonl [more.jsonl ...]

prints the Markdown table of docs/ACCURACY.md from such runs' JSON lines (one row per
configuration; differences against the uncompressed runs at the same learning rate, ranks and
epochs; tools/eval/accuracy/fidelity_matrix.sh runs that table's configurations).

A run prints per-epoch test accuracy and, at the end, one JSON line with the accuracy, the bits
per value on the wire (exact block sizes of the v1 format: headers, tile tables, groups of 5
and zero runs), the density of the push and pull blocks, the relative error of the combined
gradient against the exact average, and how long values wait in the residuals (steps between
two sends of a value, weighted by what is sent).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "examples"))
from fashion_mnist import DATA_DIR, MODELS, load_split, make_model  # noqa: E402

# The paper's operating point: tensors under 64 KiB sent exact (the engine's default is 1 KiB),
# in fp32 values.
MIN_COMPRESS_VALUES = 65536 // 4
TILE_VALUES = 5 * 4096


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", choices=MODELS, default="cnn")
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--batch-size", type=int, default=0, help="per rank (default 256 / ranks)")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--schedule", choices=("cosine", "constant"), default="cosine")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--compression", choices=("threelc", "none"), default="threelc")
    ap.add_argument("--push", choices=("3lc", "exact"), default="3lc")
    ap.add_argument("--pull", choices=("3lc", "exact"), default="3lc")
    ap.add_argument("--sparsity", type=float, default=1.0)
    ap.add_argument("--pull-sparsity", type=float, default=0.0,
                    help="s of the pull quantization (0: --sparsity)")
    ap.add_argument("--scale-values", type=int, default=0,
                    help="values per scale inside a block (0: one scale a block)")
    ap.add_argument("--pull-scale-values", type=int, default=-1,
                    help="values per scale of the pull alone (-1: --scale-values)")
    ap.add_argument("--min-compress-values", type=int, default=MIN_COMPRESS_VALUES,
                    help="tensors of fewer values are sent exact (THREELC_MIN_COMPRESS_BYTES / 4)")
    ap.add_argument("--small-scale-values", type=int, default=0,
                    help="values per scale in the blocks of tensors of fewer than "
                         "--small-tensor-values values (0: --scale-values everywhere)")
    ap.add_argument("--small-tensor-values", type=int, default=MIN_COMPRESS_VALUES)
    ap.add_argument("--momentum-correction", action="store_true")
    ap.add_argument("--magnitude", choices=("max", "mean"), default="max",
                    help="what a sent value decodes to: the scale M * s (the codec's v1 "
                         "encoder), or the mean |a| of the values sent in the scale group")
    ap.add_argument("--density", type=float, default=0.0,
                    help="send the largest this fraction of each scale group (threshold at that "
                         "quantile instead of M * s / 2); 0: the codec's threshold")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--data-dir", type=Path, default=DATA_DIR)
    args = ap.parse_args(argv)
    if args.batch_size == 0:
        args.batch_size = 256 // args.ranks
    if args.pull_sparsity == 0.0:
        args.pull_sparsity = args.sparsity
    if args.pull_scale_values < 0:
        args.pull_scale_values = args.scale_values
    return args


def quantize(a: torch.Tensor, sparsity: float, scale_values: int, args):
    """(decoded values, residual) of the quantizer on `a`: the codec's (threshold M * s / 2,
    sent as +-M * s), one scale per --scale-values values (0: one for all), or the variants
    that --magnitude and --density choose."""
    n = a.numel()
    if scale_values <= 0 or scale_values >= n:
        groups = a.view(1, n)
    else:
        pad = (-n) % scale_values
        groups = F.pad(a, (0, pad)).view(-1, scale_values)
    magnitude = groups.abs()
    scale = magnitude.amax(dim=1, keepdim=True) * sparsity
    if args.density > 0:
        k = max(1, int(round(args.density * groups.shape[1])))
        threshold = magnitude.topk(k, dim=1).values[:, -1:]
        chosen = magnitude >= threshold
    else:
        chosen = magnitude > scale / 2
    if args.magnitude == "mean":
        scale = (magnitude * chosen).sum(1, keepdim=True) / chosen.sum(1, keepdim=True).clamp_min(1)
    decoded = (torch.sign(groups) * scale * chosen).flatten()[:n]
    return decoded, a - decoded


def block_bytes(decoded: torch.Tensor, scale_values: int) -> int:
    """Exact size of the v1 block holding these trits (plus 4 bytes a scale beyond the first
    when --scale-values cuts the block into several scale groups)."""
    nz = (decoded != 0).numpy()
    n = nz.size
    total = 16
    for begin in range(0, n, TILE_VALUES):
        tile = nz[begin:begin + TILE_VALUES]
        g = -(-tile.size // 5)
        padded = np.zeros(5 * g, bool)
        padded[:tile.size] = tile
        group_nz = padded.reshape(5, g).any(axis=0)  # group j packs j, j+g, ..., j+4g
        literal = int(group_nz.sum())
        # Zero runs: a run of k zero groups costs k // 14 + (1 if k % 14 else 0) bytes.
        edges = np.flatnonzero(np.diff(np.concatenate(([1], group_nz.astype(np.int8), [1]))))
        runs = edges[1::2] - edges[0::2]
        total += 2 + literal + int((runs // 14).sum() + (runs % 14 != 0).sum())
    if 0 < scale_values < n:
        total += 4 * (-(-n // scale_values) - 1)
    return total


class PushPull:
    """The residuals of every rank and the statistics of the run."""

    def __init__(self, sizes, ranks, args):
        self.args = args
        self.ranks = ranks
        total = sum(sizes)
        # (segment, start, end, push and pull values per scale) in the fused buffer; a block
        # never crosses a tensor
        self.blocks = []
        bounds = np.cumsum([0] + sizes)
        seg = [0]  # segment j starts at seg[j]; the first total % ranks get one more value
        for j in range(ranks):
            seg.append(seg[-1] + total // ranks + (1 if j < total % ranks else 0))
        for j in range(ranks):
            cuts = sorted({seg[j], seg[j + 1], *[b for b in bounds if seg[j] < b < seg[j + 1]]})
            for lo, hi in zip(cuts, cuts[1:]):
                tensor = sizes[int(np.searchsorted(bounds, lo, side="right")) - 1]
                small = args.small_scale_values and tensor < args.small_tensor_values
                push = args.small_scale_values if small else args.scale_values
                pull = args.small_scale_values if small else args.pull_scale_values
                self.blocks.append((j, lo, hi, push, pull))
        self.push_error = torch.zeros(ranks, total)
        self.pull_error = torch.zeros(total)
        self.last_sent = torch.zeros(ranks, total)  # step a push value was last sent
        self.step = 0
        self.bytes = 0
        self.values = 0
        self.push_nonzero = self.push_values = self.pull_nonzero = self.pull_values = 0
        self.rel_error_sum = 0.0
        self.wait_weighted = 0.0
        self.wait_weight = 0.0

    def sum(self, grads: torch.Tensor) -> torch.Tensor:
        """grads [ranks, total] -> the summed result every rank ends with."""
        a, self.step = self.args, self.step + 1
        out = torch.empty(grads.shape[1])
        for j, lo, hi, push_tile, pull_tile in self.blocks:
            owner_sum = grads[j, lo:hi].clone()
            for r in range(self.ranks):
                if r == j:
                    continue
                x = grads[r, lo:hi]
                if a.push == "exact":
                    owner_sum += x
                    self.bytes += 4 * (hi - lo)
                    continue
                dec, self.push_error[r, lo:hi] = quantize(x + self.push_error[r, lo:hi],
                                                          a.sparsity, push_tile, a)
                owner_sum += dec
                sent = dec != 0
                waited = (self.step - self.last_sent[r, lo:hi])[sent]
                weight = dec[sent].abs()
                self.wait_weighted += float((waited * weight).sum())
                self.wait_weight += float(weight.sum())
                self.last_sent[r, lo:hi][sent] = self.step
                self.push_nonzero += int(sent.sum())
                self.push_values += hi - lo
                self.bytes += block_bytes(dec, push_tile)
            if a.pull == "exact":
                out[lo:hi] = owner_sum
                self.bytes += 4 * (hi - lo) * (self.ranks - 1)
            else:
                dec, self.pull_error[lo:hi] = quantize(owner_sum + self.pull_error[lo:hi],
                                                       a.pull_sparsity, pull_tile, a)
                out[lo:hi] = dec
                self.pull_nonzero += int((dec != 0).sum())
                self.pull_values += hi - lo
                self.bytes += block_bytes(dec, pull_tile) * (self.ranks - 1)
            self.values += 2 * (hi - lo) * (self.ranks - 1)  # what an exact push_pull sends
        exact = grads.sum(0)
        self.rel_error_sum += float((out - exact).norm() / exact.norm().clamp_min(1e-30))
        return out

    def summary(self):
        return {
            "bits_per_value": round(8 * self.bytes / max(1, self.values), 4),
            "compression_ratio": round(4 * self.values / max(1, self.bytes), 2),
            "push_density": round(self.push_nonzero / max(1, self.push_values), 5),
            "pull_density": round(self.pull_nonzero / max(1, self.pull_values), 5),
            "relative_error": round(self.rel_error_sum / max(1, self.step), 4),
            "push_wait_steps": round(self.wait_weighted / max(1e-30, self.wait_weight), 2),
        }


CONFIG = ("model", "ranks", "lr", "epochs", "compression", "push", "pull", "sparsity",
          "pull_sparsity",
          "scale_values", "pull_scale_values", "momentum_correction", "magnitude", "density",
          "min_compress_values", "small_scale_values", "small_tensor_values")


def describe(run: dict) -> str:
    """What a configuration changes against the codec's 3LC (s = 1, a scale a block)."""
    if run["compression"] == "none":
        return "none"
    parts = []
    if run["push"] == "exact":
        parts.append("push exact")
    if run["pull"] == "exact":
        parts.append("pull exact")
    if run["sparsity"] != 1.0:
        parts.append(f"s={run['sparsity']:g}")
    if run.get("pull_sparsity", run["sparsity"]) != run["sparsity"]:
        parts.append(f"pull s={run['pull_sparsity']:g}")
    if run["scale_values"]:
        parts.append(f"a scale per {run['scale_values']} values")
    if run["pull_scale_values"] != run["scale_values"]:
        parts.append(f"pull: a scale per {run['pull_scale_values'] or 'block'} values")
    if run.get("magnitude", "max") != "max":
        parts.append(f"magnitude {run['magnitude']}")
    if run.get("density"):
        parts.append(f"top {100 * run['density']:g} %")
    if run["momentum_correction"]:
        parts.append("momentum correction")
    if run.get("small_scale_values"):
        parts.append(f"a scale per {run['small_scale_values']} values in tensors under "
                     f"{run['small_tensor_values']} values")
    if run.get("min_compress_values", MIN_COMPRESS_VALUES) != MIN_COMPRESS_VALUES:
        parts.append(f"tensors of {run['min_compress_values']}+ values compressed")
    return "3LC" + (": " + ", ".join(parts) if parts else " s=1, a scale a block (the paper's)")


def table(paths) -> str:
    """The Markdown table of the runs in `paths` (JSON lines of this script)."""
    groups = {}
    for path in paths:
        for line in Path(path).read_text().splitlines():
            run = {"model": "cnn", "magnitude": "max", "density": 0.0,
                   "min_compress_values": MIN_COMPRESS_VALUES, "small_scale_values": 0,
                   "small_tensor_values": MIN_COMPRESS_VALUES, **json.loads(line)}
            run.setdefault("pull_sparsity", run["sparsity"])
            run.setdefault("pull_scale_values", run["scale_values"])
            groups.setdefault(tuple(run.get(k) for k in CONFIG), []).append(run)
    # A configuration's key: (model, ranks, lr, epochs) then what it compresses and how.
    baseline = {k[:4]: statistics.mean(r["test_accuracy"] for r in runs)
                for k, runs in groups.items() if k[4] == "none"}
    rows = ["| model | ranks | lr | epochs | configuration | seeds | mean accuracy | per seed | "
            "vs none (pp) | ratio | push / pull density | relative error | push wait (steps) |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for k, runs in sorted(groups.items(), key=lambda kv: (kv[0][:4], kv[0][4] != "none")):
        runs.sort(key=lambda r: r["seed"])
        mean = statistics.mean(r["test_accuracy"] for r in runs)
        base = baseline.get(k[:4])
        gap = "" if k[4] == "none" or base is None else f"{100 * (mean - base):+.2f}"

        def avg(field, digits):
            return f"{statistics.mean(r[field] for r in runs):.{digits}f}" if field in runs[0] \
                else ""
        density = (f"{avg('push_density', 3)} / {avg('pull_density', 3)}"
                   if "push_density" in runs[0] else "")
        ratio = f"{avg('compression_ratio', 0)}x" if "compression_ratio" in runs[0] else "1x"
        per_seed = ", ".join(f"{r['test_accuracy']:.4f}" for r in runs)
        rows.append(f"| {k[0]} | {k[1]} | {k[2]:g} | {k[3]} | {describe(runs[0])} | {len(runs)} | "
                    f"{mean:.4f} | {per_seed} | {gap} | {ratio} | {density} | "
                    f"{avg('relative_error', 2)} | {avg('push_wait_steps', 1)} |")
    return "\n".join(rows)


def main(argv=None) -> int:
    if argv is None:
        argv = sys.argv[1:]
    if argv[:1] == ["--table"]:
        print(table(argv[1:]))
        return 0
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    train_x, train_y = load_split(args.data_dir, "train")
    test_x, test_y = load_split(args.data_dir, "t10k")
    n, b = args.ranks, args.batch_size
    shards = [np.arange(r, len(train_x), n) for r in range(n)]
    steps = (len(train_x) // n) // b
    model = make_model(args.model)
    params = list(model.named_parameters())
    compressed = [i for i, (_, p) in enumerate(params) if p.numel() >= args.min_compress_values]
    compressed.reverse()  # backward produces the last layers' gradients first
    sizes = [params[i][1].numel() for i in compressed]
    momentum = 0.0 if args.momentum_correction else args.momentum
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=momentum)
    total_steps = steps * args.epochs
    schedule = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: 0.5 * (1 + math.cos(math.pi * s / total_steps))
        if args.schedule == "cosine" else 1.0)
    pp = PushPull(sizes, n, args) if args.compression == "threelc" else None
    velocity = torch.zeros(n, sum(sizes))  # per rank, with --momentum-correction
    raw_velocity = {}
    rng = np.random.default_rng(args.seed)
    start = time.perf_counter()
    accuracy = 0.0
    for epoch in range(1, args.epochs + 1):
        perm = rng.permutation(len(shards[0]))
        loss_sum = 0.0
        for step in range(steps):
            per_rank = []
            for r in range(n):
                idx = torch.from_numpy(shards[r][perm[step * b:(step + 1) * b]])
                model.zero_grad()
                loss = F.cross_entropy(model(train_x[idx]), train_y[idx])
                loss.backward()
                loss_sum += loss.item() / n
                per_rank.append([p.grad.detach().clone() for _, p in params])
            averaged = [torch.stack([g[i] for g in per_rank]).mean(0) for i in range(len(params))]
            if pp is not None:
                fused = torch.stack([torch.cat([g[i].flatten() for i in compressed])
                                     for g in per_rank])
                if args.momentum_correction:
                    velocity.mul_(args.momentum).add_(fused)
                    fused = velocity
                result = pp.sum(fused) / n
                offset = 0
                for i in compressed:
                    size = params[i][1].numel()
                    averaged[i] = result[offset:offset + size].view_as(params[i][1])
                    offset += size
            if args.momentum_correction:  # the raw tensors keep an exact momentum of their own
                for i in range(len(params)):
                    if i not in compressed:
                        state = raw_velocity.setdefault(i, torch.zeros_like(averaged[i]))
                        averaged[i] = state.mul_(args.momentum).add_(averaged[i]).clone()
            for (_, p), g in zip(params, averaged):
                p.grad = g
            opt.step()
            schedule.step()
        model.eval()
        with torch.no_grad():
            correct = sum(int((model(test_x[i:i + 1000]).argmax(1) == test_y[i:i + 1000]).sum())
                          for i in range(0, len(test_x), 1000))
        model.train()
        accuracy = correct / len(test_x)
        print(f"epoch {epoch}: loss {loss_sum / steps:.4f}, test accuracy {accuracy:.4f}, "
              f"{time.perf_counter() - start:.0f} s", flush=True)
    summary = {"test_accuracy": accuracy, "model": args.model, "ranks": n, "lr": args.lr,
               "epochs": args.epochs,
               "seed": args.seed, "compression": args.compression, "push": args.push,
               "pull": args.pull, "sparsity": args.sparsity,
               "pull_sparsity": args.pull_sparsity, "scale_values": args.scale_values,
               "pull_scale_values": args.pull_scale_values,
               "momentum_correction": args.momentum_correction, "magnitude": args.magnitude,
               "density": args.density, "min_compress_values": args.min_compress_values,
               "small_scale_values": args.small_scale_values,
               "small_tensor_values": args.small_tensor_values}
    if pp is not None:
        summary.update(pp.summary())
    print(json.dumps(summary), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
