#!/usr/bin/env bash
# Ring throughput of the TCP transport on loopback next to iperf3 single-stream loopback,
# measured in the same run (iperf3 before and after the ring; the baseline is their mean).
# Prints the JSON lines of `threelc-bench ring` with "iperf3_gbps" and "ratio_to_iperf3" added.
#   tools/bench/ring_vs_iperf3.sh [NP=2] [ring options, e.g. --sizes 1,16,256]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
np=${1:-2}
shift || true
command -v iperf3 >/dev/null || { echo "ring_vs_iperf3: iperf3 is not installed (tools/setup.sh --tests)" >&2; exit 1; }

free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

iperf3_gbps() {
  local port
  port=$(free_port)
  iperf3 -s -1 -B 127.0.0.1 -p "$port" >/dev/null 2>&1 &
  local server=$!
  sleep 0.5
  iperf3 -c 127.0.0.1 -p "$port" -t 5 -J |
    /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"] / 8e9)'
  wait "$server" || true
}

before=$(iperf3_gbps)
ring=$("$root/tools/threelcrun" -np "$np" "$root/build/bin/threelc-bench" ring --json "$@")
after=$(iperf3_gbps)
BEFORE=$before AFTER=$after /usr/bin/python3 -c '
import json, os, re, sys
baseline = (float(os.environ["BEFORE"]) + float(os.environ["AFTER"])) / 2
for line in sys.stdin:
    line = re.sub(r"^\[\d+\]\s*", "", line.strip())
    if not line.startswith("{"):
        continue
    record = json.loads(line)
    record["iperf3_gbps"] = round(baseline, 4)
    record["iperf3_before_after"] = [float(os.environ["BEFORE"]), float(os.environ["AFTER"])]
    record["ratio_to_iperf3"] = round(record["gbps"] / baseline, 4)
    print(json.dumps(record))
' <<<"$ring"
