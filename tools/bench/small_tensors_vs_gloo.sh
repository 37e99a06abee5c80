#!/usr/bin/env bash
# Steps of small tensors from Python (tools/bench/step_bench.py): gloo, threelc 3LC and threelc
# raw, each its own threelcrun job, for every rank count in turn. Prints the JSON lines, then a
# markdown table of the medians (over ROUNDS rounds) with their ratios to gloo.
#   tools/bench/small_tensors_vs_gloo.sh                 # ranks 2 4, 1 and 100 tensors, 1 and 64 KiB
#   RANKS="4" ROUNDS=3 tools/bench/small_tensors_vs_gloo.sh
# Extra arguments go to every step_bench.py run (e.g. --tensors 10 --bytes 4096).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
run="$root/tools/threelcrun"
python=/usr/bin/python3
export PYTHONPATH="$root/frameworks/python${PYTHONPATH:+:$PYTHONPATH}"
[[ -e "$root/build/lib/libthreelc.so" ]] || {
  echo "small_tensors_vs_gloo: build build/lib/libthreelc.so first (tools/build.sh)" >&2; exit 1; }

ranks_list=${RANKS:-2 4}
rounds=${ROUNDS:-1}

records=$(mktemp)
trap 'rm -f "$records"' EXIT
for ((round = 1; round <= rounds; ++round)); do
  for np in $ranks_list; do
    for backend in gloo none threelc; do
      "$run" -np "$np" "$python" "$root/tools/bench/step_bench.py" --backend "$backend" --json "$@" |
        sed -n 's/^\[0\] \({.*}\)$/\1/p' | tee -a "$records"
    done
  done
done

"$python" - "$records" <<'PY'
import json, statistics, sys
from collections import defaultdict

runs = defaultdict(list)  # (ranks, tensors, bytes, backend) -> [median seconds]
for line in open(sys.argv[1]):
    r = json.loads(line)
    runs[(r["ranks"], r["tensors"], r["bytes"], r["backend"])].append(r["time_s_median"])
cases = sorted({key[:3] for key in runs})
print()
print("| ranks | tensors x bytes | gloo ms | threelc none ms (x gloo) | threelc 3LC ms (x gloo) | rounds |")
print("| --- | --- | --- | --- | --- | --- |")
for ranks, tensors, nbytes in cases:
    med = {b: statistics.median(runs[(ranks, tensors, nbytes, b)])
           for b in ("gloo", "none", "threelc") if runs.get((ranks, tensors, nbytes, b))}
    gloo = med.get("gloo")
    def cell(b):
        if b not in med:
            return "-"
        ratio = f" ({med[b] / gloo:.2f}x)" if gloo else ""
        return f"{med[b] * 1e3:.3f}{ratio}"
    print(f"| {ranks} | {tensors} x {nbytes} | {cell('gloo')} | {cell('none')} | "
          f"{cell('threelc')} | {len(runs[(ranks, tensors, nbytes, 'gloo')])} |")
PY
