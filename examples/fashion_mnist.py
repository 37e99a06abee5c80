"""Fashion-MNIST from the Debian package dataset-fashion-mnist (/usr/share/datasets/fashion-mnist),
read from its idx files (optionally gzipped) into normalized torch tensors, and the two models
the examples train (a CNN, and an MLP). Shared by the training examples and tools/dev/codec_demo.py."""

from __future__ import annotations

import gzip
import struct
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

DATA_DIR = Path("/usr/share/datasets/fashion-mnist")
MEAN, STD = 0.2860, 0.3530  # Fashion-MNIST training set
INSTALL_HINT = "install the Debian package dataset-fashion-mnist (tools/setup.sh does)"


def read_idx(path: Path, magic: int) -> np.ndarray:
    """Reads an idx file (optionally gzipped): big-endian magic, dims, then uint8 data."""
    if not path.exists() and Path(f"{path}.gz").exists():
        path = Path(f"{path}.gz")
    if not path.exists():
        raise FileNotFoundError(f"{path} not found: {INSTALL_HINT}")
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":  # gzip
        data = gzip.decompress(data)
    found, = struct.unpack_from(">I", data, 0)
    if found != magic:
        raise ValueError(f"{path}: magic {found:#x}, expected {magic:#x}")
    ndim = magic & 0xFF
    dims = struct.unpack_from(f">{ndim}I", data, 4)
    offset = 4 + 4 * ndim
    count = int(np.prod(dims))
    if len(data) != offset + count:
        raise ValueError(f"{path}: {len(data)} bytes, expected {offset + count} for dims {dims}")
    return np.frombuffer(data, np.uint8, count, offset).reshape(dims)


def load_split(data_dir: Path, prefix: str):
    """(images as float32 [n, 1, 28, 28] normalized, labels as int64 [n]); prefix is "train"
    or "t10k"."""
    images = read_idx(data_dir / f"{prefix}-images-idx3-ubyte", 0x803)
    labels = read_idx(data_dir / f"{prefix}-labels-idx1-ubyte", 0x801)
    x = torch.from_numpy(((images.astype(np.float32) / 255.0 - MEAN) / STD)[:, None])
    y = torch.from_numpy(labels.astype(np.int64))
    return x, y


class Net(nn.Module):
    """Two 5x5 convolutions (`conv1`, `conv2` channels, padding 2) with ReLU and 2x2 max
    pooling, then a hidden layer of `hidden` units and 10 classes."""

    def __init__(self, conv1: int = 16, conv2: int = 48, hidden: int = 128):
        super().__init__()
        self.conv1 = nn.Conv2d(1, conv1, 5, padding=2)
        self.conv2 = nn.Conv2d(conv1, conv2, 5, padding=2)
        self.fc1 = nn.Linear(conv2 * 7 * 7, hidden)
        self.fc2 = nn.Linear(hidden, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = F.relu(self.fc1(x.flatten(1)))
        return self.fc2(x)


class MLP(nn.Module):
    """Two hidden layers of `hidden` units with ReLU on the flattened image, then 10 classes."""

    def __init__(self, hidden: int = 512):
        super().__init__()
        self.fc1 = nn.Linear(28 * 28, hidden)
        self.fc2 = nn.Linear(hidden, hidden)
        self.fc3 = nn.Linear(hidden, 10)

    def forward(self, x):
        x = F.relu(self.fc1(x.flatten(1)))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


MODELS = ("cnn", "mlp", "wide")

# Each model's best learning rate for uncompressed training (the sweep in docs/ACCURACY.md):
# the examples' default --lr.
BEST_LR = {"cnn": 0.05, "mlp": 0.2, "wide": 0.1}


def make_model(name: str) -> nn.Module:
    """The examples' model by name: "cnn" (322k parameters; every tensor but conv1.bias,
    conv2.bias, fc1.bias and fc2.bias, 99.9% of the values, is at least
    THREELC_MIN_COMPRESS_BYTES and 3LC-compressed) or "mlp" (670k parameters; every tensor but
    fc3.bias is compressed) or "wide", the MLP with hidden layers of 3072 (11.9M parameters, 48 MB
    of float32 gradients a step for little compute: on a 1 Gbit/s link uncompressed training
    spends most of a step on the network)."""
    if name == "cnn":
        return Net(conv1=16, conv2=48, hidden=128)
    if name == "mlp":
        return MLP(hidden=512)
    if name == "wide":
        return MLP(hidden=3072)
    raise ValueError(f"unknown model {name!r}: one of {', '.join(MODELS)}")
