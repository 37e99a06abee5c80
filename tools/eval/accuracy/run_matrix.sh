#!/usr/bin/env bash
# Runs the accuracy-parity matrix of docs/ACCURACY.md: examples/train_fashion_mnist.py under
# threelcrun for every configuration and seed, appending each run's final JSON line (plus the
# configuration) to RESULTS (default accuracy_results.jsonl). Then
#   /usr/bin/python3 tools/eval/accuracy/summarize.py RESULTS
# prints the tables. Select parts with the first argument:
#   parity4  4 ranks, none and 3LC s=1.0, seeds 0-2
#   parity8  the same at 8 ranks (batch 32 per rank: the same global batch and steps)
#   ring     THREELC_ALLREDUCE=ring, 3LC s=1.0, 4 and 8 ranks, seeds 0-2
#   sweep    3LC s=1.1, 1.25, 1.5 at 4 ranks, seeds 0-2; s=1.75, 1.9 seed 0
#   all      everything above (29 runs of 2 epochs; about 1 h 15 min on a 2-core machine)
#   lr       uncompressed at 4 ranks, learning rates 0.01, 0.02, 0.05, 0.1, seeds 0-2
#   chunks   at LR, 4 ranks: none, 3LC s=1.0, and 3LC s=1.0 with THREELC_CHUNK_BYTES=4K (a
#            scale per 1024 values), seeds 0-2
#   tiles    at LR, 4 ranks: 3LC with THREELC_SCALE_TILE=320, 640 and 1280 (s=1.0; TILES sets
#            the list), and 320 at s=1.1 when TILES is unset, seeds 0-2
#   tiles8   at LR, 8 ranks: none, and 3LC with THREELC_SCALE_TILE=320 (or each of TILES)
#   none     at LR, 4 and 8 ranks: uncompressed, seeds 0-2
#   defaults at LR, 4 and 8 ranks: 3LC at the engine's defaults (or SETTINGS), seeds 0-2
#   paper    at LR, 4 and 8 ranks: the paper's 3LC (THREELC_SCALE_TILE=0: one scale a block;
#            THREELC_MIN_COMPRESS_BYTES=64K), seeds 0-2
#   ddp      at LR, 4 ranks: examples/train_fashion_mnist_ddp.py under tools/torchrun, DDP
#            alone and with the 3LC hook at the engine's defaults (or SETTINGS), seeds 0-2
#   peers    at LR, 4 ranks: the compressors a user has without 3LC: Horovod's fp16 through the
#            engine, and under DDP torch's fp16 hook and PowerSGD of rank 1, 2 and 4
#            (POWERSGD_RANKS sets the list; one bucket, error feedback, warm start; FP16=0
#            leaves out both fp16 runs), seeds 0-2
# EPOCHS (default 2) sets the epochs of every run, SEEDS (default "0 1 2") the seeds, LR (default:
# the model's, the uncompressed run's best, examples/fashion_mnist.py's BEST_LR) the learning
# rate of every part but lr, RANKS (default "4 8") the job sizes of the none, defaults and paper
# parts (batch 256 / ranks per rank), MODEL (cnn, mlp or wide; default cnn) the examples' model.
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
part=${1:-all}
results=${RESULTS:-accuracy_results.jsonl}
epochs=${EPOCHS:-2}
model=${MODEL:-cnn}
lr=${LR:-$(cd "$root/examples" && /usr/bin/python3 -c \
  "import sys; from fashion_mnist import BEST_LR; print(BEST_LR[sys.argv[1]])" "$model")}
# Engine variables of the next compressed runs, e.g. THREELC_SCALE_TILE=320 ("": the engine's
# defaults): SETTINGS, to which the chunks, tiles and tiles8 parts add their own variable.
settings=${SETTINGS:-}
logs="${results%.jsonl}.logs"
mkdir -p "$logs"
export PYTHONPATH="$root/frameworks/python${PYTHONPATH:+:$PYTHONPATH}"

# Arguments of the DDP example's hook for the next runs (e.g. --powersgd-rank 2).
hook_args=""

run() {  # run NP BATCH ALGORITHM COMPRESSION SPARSITY SEED [LR]
  local np=$1 batch=$2 algorithm=$3 compression=$4 sparsity=$5 seed=$6 run_lr=${7:-$lr} line
  local settings=$settings
  [[ $compression != threelc ]] && settings=""  # they are 3LC's: none applies to the others
  local log
  log="$logs/$(/usr/bin/python3 "$root/tools/eval/accuracy/run_log.py" --model="$model" \
    --ranks="$np" --algorithm="$algorithm" --method="$compression" --sparsity="$sparsity" \
    --settings="$settings" --hook-args="$hook_args" --lr="$run_lr" --epochs="$epochs" \
    --seed="$seed")"  # summarize.py finds it by the same name
  echo "== $model, $np ranks, batch $batch, $algorithm, $compression s=$sparsity $settings, lr $run_lr, seed $seed ($log)" >&2
  local common=(--model "$model" --epochs "$epochs" --batch-size "$batch" --seed "$seed"
                --lr "$run_lr" --log-every 1000)
  if [[ $algorithm == ddp ]]; then  # compression none: DDP alone; threelc: DDP + the 3LC hook
    # shellcheck disable=SC2086  # settings is a list of VAR=value words
    env $settings "$root/tools/torchrun" --standalone --nproc_per_node "$np" \
      "$root/examples/train_fashion_mnist_ddp.py" "${common[@]}" --hook "$compression" \
      --sparsity "$sparsity" $hook_args > "$log" 2>&1 || true
  else
    # shellcheck disable=SC2086
    env $settings THREELC_ALLREDUCE="$algorithm" \
      "$root/tools/threelcrun" -np "$np" /usr/bin/python3 \
      "$root/examples/train_fashion_mnist.py" "${common[@]}" \
      --compression "$compression" --sparsity "$sparsity" > "$log" 2>&1 || true
  fi
  line=$(sed -n 's/^\(\[0\] \)\{0,1\}\({.*}\)$/\2/p' "$log" | tail -n 1)
  if [[ -z $line ]]; then  # the run failed: keep what it said
    local why
    why=$(grep -m1 -iE 'error|diverged|nan' "$log" | tr -d '"\\' | cut -c1-300 || true)
    line=$(printf '{"failed": true, "model": "%s", "ranks": %s, "compression": "%s", "sparsity": %s, "algorithm": "%s", "seed": %s, "epochs": %s, "lr": %s, "why": "%s"}' \
      "$model" "$np" "$compression" "$sparsity" "$algorithm" "$seed" "$epochs" "$run_lr" "$why")
  fi
  if [[ -n $settings ]]; then line="${line%\}}, \"settings\": \"$settings\"}"; fi
  if [[ -n $hook_args ]]; then line="${line%\}}, \"hook_args\": \"$hook_args\"}"; fi
  echo "$line" | tee -a "$results" >&2
}

read -r -a seeds <<< "${SEEDS:-0 1 2}"
read -r -a ranks <<< "${RANKS:-4 8}"  # of the none, defaults and paper parts
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
      settings="THREELC_CHUNK_BYTES=4K${SETTINGS:+ $SETTINGS}" run 4 64 push_pull threelc 1.0 "$s"
    done ;;
  tiles)
    read -r -a tiles <<< "${TILES:-320 640 1280}"
    for s in "${seeds[@]}"; do
      for tile in "${tiles[@]}"; do
        settings="THREELC_SCALE_TILE=$tile${SETTINGS:+ $SETTINGS}" run 4 64 push_pull threelc 1.0 "$s"
      done
      if [[ -z ${TILES:-} ]]; then
        settings="THREELC_SCALE_TILE=320${SETTINGS:+ $SETTINGS}" run 4 64 push_pull threelc 1.1 "$s"
      fi
    done ;;
  tiles8)
    read -r -a tiles <<< "${TILES:-320}"
    for s in "${seeds[@]}"; do
      run 8 32 push_pull none 1.0 "$s"
      for tile in "${tiles[@]}"; do
        settings="THREELC_SCALE_TILE=$tile${SETTINGS:+ $SETTINGS}" run 8 32 push_pull threelc 1.0 "$s"
      done
    done ;;
  none|defaults)
    compression=threelc
    [[ $part == none ]] && compression=none
    for s in "${seeds[@]}"; do
      for np in "${ranks[@]}"; do run "$np" $((256 / np)) push_pull "$compression" 1.0 "$s"; done
    done ;;
  paper)
    for s in "${seeds[@]}"; do
      for np in "${ranks[@]}"; do
        settings="THREELC_SCALE_TILE=0 THREELC_MIN_COMPRESS_BYTES=64K" \
          run "$np" $((256 / np)) push_pull threelc 1.0 "$s"
      done
    done ;;
  ddp)
    for s in "${seeds[@]}"; do run 4 64 ddp none 1.0 "$s"; run 4 64 ddp threelc 1.0 "$s"; done ;;
  peers)
    read -r -a powersgd_ranks <<< "${POWERSGD_RANKS:-1 2 4}"
    for s in "${seeds[@]}"; do
      if [[ ${FP16:-1} != 0 ]]; then
        run 4 64 push_pull fp16 1.0 "$s"
        run 4 64 ddp fp16 1.0 "$s"
      fi
      for r in "${powersgd_ranks[@]}"; do
        hook_args="--powersgd-rank $r --bucket-cap-mb 1000" run 4 64 ddp powersgd 1.0 "$s"
      done
    done ;;
  parity4|parity8|ring) ;;
  *) echo "usage: $0 [parity4|parity8|ring|sweep|all|lr|chunks|tiles|tiles8|none|defaults|paper|ddp|peers]" >&2
     exit 2 ;;
esac
