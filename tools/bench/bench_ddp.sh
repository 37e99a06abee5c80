#!/usr/bin/env bash
# DistributedDataParallel with and without the threelc hook, back to back on this machine:
# examples/train_fashion_mnist_ddp.py under torchrun --standalone (a free rendezvous port), first
# --hook none (DDP's gloo allreduce), then --hook threelc (3LC through the threelc engine),
# the same seed and settings. Appends both final JSON lines to RESULTS (default
# /tmp/ddp_bench.jsonl; each run's full output goes to RESULTS' name with .logs instead of
# .jsonl) and prints a table: seconds of training per epoch, MB each rank sent over TCP (the
# kernel's count, the same measure in both modes), the compression ratio, the test accuracy,
# and threelc's figures over none's.
#   tools/bench/bench_ddp.sh                       # 4 ranks, 2 epochs
#   NP=2 EPOCHS=1 tools/bench/bench_ddp.sh --seed 1 --max-steps 100
# Arguments go to both runs. NP (default 4) ranks, EPOCHS (default 2) epochs; TORCHRUN picks
# the launcher (default tools/torchrun: Debian's torchrun with torch 1.13's faults mended);
# THREELC_LIBRARY another libthreelc.so (default build/lib/libthreelc.so: tools/build.sh).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
python=/usr/bin/python3
np=${NP:-4}
epochs=${EPOCHS:-2}
results=${RESULTS:-/tmp/ddp_bench.jsonl}
logs="${results%.jsonl}.logs"
torchrun=${TORCHRUN:-$root/tools/torchrun}
example="$root/examples/train_fashion_mnist_ddp.py"

die() { echo "bench_ddp: $*" >&2; exit 1; }
[[ $np =~ ^[0-9]+$ ]] && ((np >= 1)) || die "NP=$np is not a number of ranks"
[[ $epochs =~ ^[0-9]+$ ]] && ((epochs >= 1)) || die "EPOCHS=$epochs is not a number of epochs"
[[ -x $torchrun ]] || die "torchrun not found ($torchrun): tools/setup.sh --tests installs python3-torch"
command -v ss >/dev/null || [[ -x /usr/bin/ss || -x /bin/ss ]] ||
  die "ss not found: the bytes sent are measured with it (apt-get install iproute2)"
library=${THREELC_LIBRARY:-$root/build/lib/libthreelc.so}
[[ -f $library ]] || die "$library not found: build it first (tools/build.sh)"
mkdir -p "$logs" "$(dirname "$results")"
export PYTHONPATH="$root/frameworks/python${PYTHONPATH:+:$PYTHONPATH}"

records=$(mktemp)
trap 'rm -f "$records"' EXIT
for hook in none threelc; do
  log="$logs/np$np-e$epochs-$hook.log"
  echo "== DDP, $np ranks, $epochs epochs, hook $hook ($log)" >&2
  status=0
  "$torchrun" --standalone --nproc_per_node "$np" "$example" \
    --hook "$hook" --epochs "$epochs" --log-every 100 "$@" > "$log" 2>&1 || status=$?
  line=$(grep '^{' "$log" | tail -n 1 || true)
  if ((status != 0)) || [[ -z $line ]]; then
    echo "bench_ddp: the $hook run failed (exit $status); the end of $log:" >&2
    tail -n 25 "$log" >&2
    exit 1
  fi
  grep -E '^epoch [0-9]+:' "$log" >&2 || true
  echo "$line" | tee -a "$results" "$records" >&2
done
echo "bench_ddp: appended both runs to $results" >&2

"$python" - "$records" <<'EOF'
import json, sys

runs = {}
for line in open(sys.argv[1]):
    r = json.loads(line)
    runs[r["hook"]] = r
none, lc = runs["none"], runs["threelc"]
print(f"\nDDP on Fashion-MNIST: {lc['ranks']} ranks, {lc['epochs']} epochs, {lc['steps']} steps, "
      f"seed {lc['seed']}, 3LC sparsity {lc['sparsity']}")
print(f"| hook | s/epoch | MB sent per rank | compression | test accuracy |")
print(f"| --- | ---: | ---: | ---: | ---: |")
def cell(v, fmt):
    return "n/a" if v is None else format(v, fmt)
for r in (none, lc):
    print(f"| {r['hook']} | {r['seconds_per_epoch']:.2f} | {cell(r['mb_sent_per_rank'], '.2f')} | "
          f"{cell(r['compression_ratio'], '.1f')}x | {r['test_accuracy']:.4f} |")
def ratio(key):
    a, b = lc.get(key), none.get(key)
    return "n/a" if a is None or not b else f"{a / b:.3f}x"
accuracy = (lc["test_accuracy"] - none["test_accuracy"]) * 100
print(f"| threelc / none | {ratio('seconds_per_epoch')} | {ratio('mb_sent_per_rank')} | | "
      f"{accuracy:+.2f} pp |")
if lc.get("engine_mb_sent_per_rank") is not None:
    print(f"\nthreelc engine's own count: {lc['engine_mb_sent_per_rank']:.2f} MB per rank "
          f"(of {cell(lc['mb_sent_per_rank'], '.2f')} MB over all sockets); uncompressed ring: "
          f"{none['ring_mb_per_rank']:.2f} MB per rank")
EOF
