#!/usr/bin/env bash
# The README's main command: install what is missing, build, make the torch 2.13 virtual
# environment (build/venv-torch2, tools/torch2_venv.sh), run the main job in it: 4 ranks
# (NP=N to change) training a CNN on Fashion-MNIST with threelc.torch, gradients
# 3LC-compressed by the engine (examples/train_fashion_mnist.py; arguments go to it, e.g.
# --compression none, --sparsity 1.25, --epochs 3, --seed 1, --amp bf16).
# THREELC_DEMO_PYTHON=/usr/bin/python3 runs it on Debian's torch 1.13 instead.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/tools/setup.sh"
"$root/tools/build.sh"
python=${THREELC_DEMO_PYTHON:-$("$root/tools/torch2_venv.sh")}
exec "$root/tools/threelcrun" -np "${NP:-4}" "$python" \
  "$root/examples/train_fashion_mnist.py" "$@"
