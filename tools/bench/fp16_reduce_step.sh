#!/bin/bash
# Horovod's fp16 (Compression.fp16) through the engine on loopback: the wide MLP, 4 ranks, two
# interleaved rounds. The engine's fp16 arithmetic one value at a time (THREELC_CODEC_ISA=scalar)
# against the CPU's F16C conversions (the default), with uncompressed threelc and DDP in the
# same rounds. Needs root (tools/eval/evaluate). Usage: tools/bench/fp16_reduce_step.sh [OUT]
# (default build/eval/fp16); report: tools/eval/evaluate --report OUT/scalar and OUT/f16c.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-build/eval/fp16}
for round in 1 2; do
  echo "round $round" >&2
  THREELC_CODEC_ISA=scalar tools/eval/evaluate --only training --training-rates loopback \
    --models wide --methods "threelc fp16" --training-rounds 1 --out "$out/scalar"
  tools/eval/evaluate --only training --training-rates loopback --models wide \
    --methods "threelc fp16,threelc none,DDP" --training-rounds 1 --out "$out/f16c"
done
