#!/usr/bin/env bash
# The README's main command: install what is missing, build, run the main job: 4 ranks
# (NP=N to change) training a CNN on Fashion-MNIST with threelc.torch, gradients
# 3LC-compressed by the engine (examples/train_fashion_mnist.py; arguments go to it, e.g.
# --compression none, --sparsity 1.25, --epochs 3, --seed 1).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/tools/setup.sh"
"$root/tools/build.sh"
exec "$root/tools/threelcrun" -np "${NP:-4}" /usr/bin/python3 \
  "$root/examples/train_fashion_mnist.py" "$@"
