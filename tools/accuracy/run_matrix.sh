#!/usr/bin/env bash
# Runs the accuracy-parity matrix of docs/ACCURACY.md: examples/train_fashion_mnist.py under
# threelcrun for every configuration and seed, appending each run's final JSON line (plus the
# configuration) to RESULTS (default accuracy_results.jsonl). Then
#   /usr/bin/python3 tools/accuracy/summarize.py RESULTS
# prints the tables. Select parts with the first argument:
#   parity4  4 ranks, none and 3LC s=1.0, seeds 0-2
#   parity8  the same at 8 ranks (batch 32 per rank: the same global batch and steps)
#   ring     THREELC_ALLREDUCE=ring, 3LC s=1.0, 4 and 8 ranks, seeds 0-2
#   sweep    3LC s=1.1, 1.25, 1.5 at 4 ranks, seeds 0-2; s=1.75, 1.9 seed 0
#   all      everything above (29 runs of 2 epochs; about 1 h 15 min on a 2-core machine)
#   lr       uncompressed at 4 ranks, learning rates 0.01, 0.02, 0.05, 0.1, seeds 0-2
#   chunks   at LR, 4 ranks: none, 3LC s=1.0, and 3LC s=1.0 with THREELC_CHUNK_BYTES=4K (a
#            scale per 1024 values), seeds 0-2
# EPOCHS (default 2) sets the epochs of every run, SEEDS (default "0 1 2") the seeds, LR (default
# 0.05, the uncompressed run's best) the learning rate of every part but lr.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
part=${1:-all}
results=${RESULTS:-accuracy_results.jsonl}
epochs=${EPOCHS:-2}
lr=${LR:-0.05}
chunk_bytes=""  # THREELC_CHUNK_BYTES of the next runs ("": the engine's default)
logs="${results%.jsonl}.logs"
mkdir -p "$logs"
export PYTHONPATH="$root/frameworks/python${PYTHONPATH:+:$PYTHONPATH}"

run() {  # run NP BATCH ALGORITHM COMPRESSION SPARSITY SEED [LR]
  local np=$1 batch=$2 algorithm=$3 compression=$4 sparsity=$5 seed=$6 run_lr=${7:-$lr} line
  local chunk=${chunk_bytes:+-chunk$chunk_bytes}
  local log="$logs/np$np-$algorithm-$compression-s$sparsity$chunk-lr$run_lr-e$epochs-seed$seed.log"
  echo "== $np ranks, batch $batch, $algorithm, $compression s=$sparsity$chunk, lr $run_lr, seed $seed ($log)" >&2
  env ${chunk_bytes:+THREELC_CHUNK_BYTES=$chunk_bytes} THREELC_ALLREDUCE="$algorithm" \
    "$root/tools/threelcrun" -np "$np" /usr/bin/python3 \
    "$root/examples/train_fashion_mnist.py" --epochs "$epochs" --batch-size "$batch" \
    --compression "$compression" --sparsity "$sparsity" --seed "$seed" --lr "$run_lr" \
    --log-every 1000 > "$log" 2>&1 || true
  line=$(sed -n 's/^\[0\] \({.*}\)$/\1/p' "$log" | tail -n 1)
  if [[ -z $line ]]; then  # the run failed: keep what it said
    local why
    why=$(grep -m1 -iE 'error|diverged|nan' "$log" | tr -d '"\\' | cut -c1-300 || true)
    line=$(printf '{"failed": true, "ranks": %s, "compression": "%s", "sparsity": %s, "algorithm": "%s", "seed": %s, "epochs": %s, "why": "%s"}' \
      "$np" "$compression" "$sparsity" "$algorithm" "$seed" "$epochs" "$why")
  fi
  [[ -n $chunk_bytes ]] && line="${line%\}}, \"chunk_bytes\": \"$chunk_bytes\"}"
  echo "$line" | tee -a "$results" >&2
}

read -r -a seeds <<< "${SEEDS:-0 1 2}"
case $part in
  parity4|all)
    for s in "${seeds[@]}"; do run 4 64 push_pull none 1.0 "$s"; run 4 64 push_pull threelc 1.0 "$s"; done ;;&
  parity8|all)
    for s in "${seeds[@]}"; do run 8 32 push_pull none 1.0 "$s"; run 8 32 push_pull threelc 1.0 "$s"; done ;;&
  ring|all)
    for s in "${seeds[@]}"; do run 4 64 ring threelc 1.0 "$s"; run 8 32 ring threelc 1.0 "$s"; done ;;&
  sweep|all)
    for s in "${seeds[@]}"; do
      for sp in 1.1 1.25 1.5; do run 4 64 push_pull threelc "$sp" "$s"; done
    done
    for sp in 1.75 1.9; do run 4 64 push_pull threelc "$sp" 0; done ;;
  lr)
    for s in "${seeds[@]}"; do
      for l in 0.01 0.02 0.05 0.1; do run 4 64 push_pull none 1.0 "$s" "$l"; done
    done ;;
  chunks)
    for s in "${seeds[@]}"; do
      run 4 64 push_pull none 1.0 "$s"; run 4 64 push_pull threelc 1.0 "$s"
      chunk_bytes=4K run 4 64 push_pull threelc 1.0 "$s"
    done ;;
  parity4|parity8|ring) ;;
  *) echo "usage: $0 [parity4|parity8|ring|sweep|all|lr|chunks]" >&2; exit 2 ;;
esac
