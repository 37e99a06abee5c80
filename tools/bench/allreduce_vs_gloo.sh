#!/usr/bin/env bash
# The engine's allreduce (3LC and uncompressed) next to torch.distributed's gloo all_reduce on
# loopback, measured in the same run: for every rank count and size, gloo, then threelc none,
# then threelc 3LC, each its own threelcrun job. Prints the JSON lines of the three benches, then
# a markdown table of the medians with their ratios to gloo.
#   tools/bench/allreduce_vs_gloo.sh                  # ranks 2 4, sizes 1 16 100 (MiB)
#   RANKS="2" SIZES="1 16" tools/bench/allreduce_vs_gloo.sh
#   ROUNDS=3 tools/bench/allreduce_vs_gloo.sh          # every (ranks, size) three times in turn
# Iterations per size (timed + 1 warm-up): <= 4 MiB 20, larger 15; ITERS=N forces
# one count. Extra arguments go to both threelc runs (e.g. --sparsity 1.5).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
bench="$root/build/bin/threelc-bench"
run="$root/tools/threelcrun"
python=/usr/bin/python3
[[ -x "$bench" ]] || { echo "allreduce_vs_gloo: build $bench first (tools/build.sh)" >&2; exit 1; }

ranks_list=${RANKS:-2 4}
sizes_list=${SIZES:-1 16 100}
rounds=${ROUNDS:-1}

iters_for() {
  if [[ -n "${ITERS:-}" ]]; then echo "$ITERS"; return; fi
  "$python" -c 'import sys; s = float(sys.argv[1]); print(20 if s <= 4 else 15)' "$1"
}

# Rank 0's JSON lines, without threelcrun's "[0] " prefix.
json_lines() { sed -n 's/^\[0\] \({.*}\)$/\1/p'; }

records=$(mktemp)
trap 'rm -f "$records"' EXIT
for ((round = 1; round <= rounds; ++round)); do
  for np in $ranks_list; do
    for size in $sizes_list; do
      iters=$(iters_for "$size")
      common=(--size-mb "$size" --iters "$iters" --warmup 1 --json)
      "$run" -np "$np" "$python" "$root/tools/bench/gloo_bench.py" "${common[@]}" | json_lines | tee -a "$records"
      "$run" -np "$np" "$bench" allreduce --compression none "${common[@]}" "$@" | json_lines | tee -a "$records"
      "$run" -np "$np" "$bench" allreduce --compression threelc "${common[@]}" "$@" | json_lines | tee -a "$records"
    done
  done
done

"$python" - "$records" <<'EOF'
import json, statistics, sys
from collections import defaultdict

runs = defaultdict(list)  # (ranks, bytes, compression) -> [record]
for line in open(sys.argv[1]):
    r = json.loads(line)
    runs[(r["ranks"], r["bytes"], r["compression"])].append(r)

def med(key, field):
    values = [r[field] for r in runs.get(key, [])]
    return statistics.median(values) if values else None

print()
print("| ranks | MiB | gloo s | threelc none s (x gloo) | threelc 3LC s (x gloo) "
      "| 3LC wire B/rank (gloo's / 3LC) | runs |")
print("| --- | --- | --- | --- | --- | --- | --- |")
for ranks, nbytes in sorted({(k[0], k[1]) for k in runs}):
    gloo = med((ranks, nbytes, "gloo"), "time_s_median")
    cells = []
    for mode in ("none", "threelc"):
        t = med((ranks, nbytes, mode), "time_s_median")
        if t is None:
            cells.append("-")
        elif gloo:
            cells.append(f"{t:.4f} ({t / gloo:.2f}x)")
        else:
            cells.append(f"{t:.4f}")
    wire = med((ranks, nbytes, "threelc"), "wire_bytes_per_rank")
    gloo_wire = 2 * (ranks - 1) * nbytes // ranks
    wire_cell = f"{wire:,.0f} ({gloo_wire / wire:.0f}x fewer)" if wire else "-"
    count = len(runs.get((ranks, nbytes, "threelc"), []))
    gloo_cell = f"{gloo:.4f}" if gloo is not None else "-"
    print(f"| {ranks} | {nbytes / 2**20:g} | {gloo_cell} | {cells[0]} | {cells[1]} | {wire_cell} "
          f"| {count} |")
EOF
