#!/usr/bin/python3
"""Dumps real gradients of the Fashion-MNIST CNN (examples/fashion_mnist.py) for
tools/eval/evaluate.

    /usr/bin/python3 tools/eval/gradients.py --out build/eval/gradients.npy --steps 100

Trains the examples' CNN with SGD (lr 0.02, momentum 0.9, batch 64, seed 0) on the training set
and saves every step's gradient, all parameters flattened in the model's order, one step after
the other, as one float32 .npy array of steps * parameters values. Prints one JSON line:
{"path", "steps", "step_values", "values"}.
"""

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
from fashion_mnist import DATA_DIR, Net, load_split  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--data-dir", default=str(DATA_DIR))
    args = p.parse_args()

    torch.manual_seed(0)
    torch.set_num_threads(2)
    x, y = load_split(Path(args.data_dir), "train")
    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9)
    step_values = sum(p.numel() for p in model.parameters())
    out = np.lib.format.open_memmap(args.out + ".partial", mode="w+", dtype=np.float32,
                                    shape=(args.steps * step_values,))
    order = torch.randperm(x.shape[0])
    for step in range(args.steps):
        batch = order[(step * 64) % x.shape[0]:][:64]
        optimizer.zero_grad()
        F.cross_entropy(model(x[batch]), y[batch]).backward()
        flat = torch.cat([p.grad.reshape(-1) for p in model.parameters()])
        out[step * step_values:(step + 1) * step_values] = flat.numpy()
        optimizer.step()
    out.flush()
    del out
    Path(args.out + ".partial").rename(args.out)
    print(json.dumps({"path": args.out, "steps": args.steps, "step_values": step_values,
                      "values": args.steps * step_values}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
