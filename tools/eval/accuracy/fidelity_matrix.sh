#!/usr/bin/env bash
# Runs the configurations of docs/ACCURACY.md's "Where the loss comes from" table with the
# one-process fidelity model (tools/eval/accuracy/fidelity_model.py), appending each run's JSON line
# to RESULTS (default fidelity_results.jsonl); then
#   /usr/bin/python3 tools/eval/accuracy/fidelity_model.py --table RESULTS
# prints the table. 4 ranks, 1 epoch, seeds 0-2 (SEEDS), learning rate 0.05 (the uncompressed
# run's best of 0.01, 0.02, 0.05, 0.1, which the first part sweeps). About 30 s a run on a 2-core
# machine (the MLP runs about 40 s); 31 configurations, 93 runs.
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
results=${RESULTS:-fidelity_results.jsonl}
read -r -a seeds <<< "${SEEDS:-0 1 2}"
model() {
  for seed in "${seeds[@]}"; do
    echo "== $* --seed $seed" >&2
    /usr/bin/python3 "$root/tools/eval/accuracy/fidelity_model.py" "$@" --seed "$seed" | tail -n 1 \
      | tee -a "$results" >&2
  done
}
for lr in 0.01 0.02 0.05 0.1; do model --compression none --lr "$lr"; done
configurations=(
  ""                                   # the codec: s = 1, a scale a block
  "--pull exact" "--push exact"        # one quantization at a time
  "--scale-values 20480" "--scale-values 4096" "--scale-values 1024" "--scale-values 256"
  "--sparsity 0.5" "--sparsity 0.25" "--pull-sparsity 0.5"
  "--sparsity 0.5 --scale-values 20480" "--sparsity 0.75 --scale-values 1024"
  "--pull-scale-values 1024" "--pull-scale-values 256"
  "--scale-values 1024 --pull-scale-values 256" "--scale-values 4096 --pull-scale-values 320"
  "--scale-values 320" "--scale-values 320 --min-compress-values 256"
  "--scale-values 320 --min-compress-values 1" "--scale-values 640 --min-compress-values 1"
  "--magnitude mean" "--magnitude mean --density 0.05" "--magnitude mean --density 0.02"
  "--momentum-correction"
)
for configuration in "${configurations[@]}"; do
  # shellcheck disable=SC2086  # each configuration is a list of arguments
  model --lr 0.05 $configuration
done
# The MLP at its uncompressed best learning rate (0.2 of 0.01-0.5, examples' sweep).
for configuration in "--compression none" "--scale-values 320 --min-compress-values 1" \
    "--scale-values 320 --min-compress-values 1 --small-scale-values 40"; do
  # shellcheck disable=SC2086
  model --model mlp --lr 0.2 $configuration
done
