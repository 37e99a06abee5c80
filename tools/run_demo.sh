#!/usr/bin/env bash
# The README's main command: install what is missing, build, run the main job (for now the
# codec demo: a CNN trained on Fashion-MNIST with 3LC-compressed gradients, printing the
# compression ratio and codec throughput on those real gradients). Arguments go to the demo.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/tools/setup.sh"
"$root/tools/build.sh"
PYTHONPATH="$root/frameworks/python${PYTHONPATH:+:$PYTHONPATH}" \
  exec /usr/bin/python3 "$root/tools/codec_demo.py" "$@"
