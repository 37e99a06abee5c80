#!/usr/bin/env bash
# The UCX transport against the TCP transport on loopback, measured in the same run, with
# `ucx_perftest -t tag_bw` (UCP tag matching, one stream) as UCX's own baseline. For every round:
#   ucx_perftest tag_bw, UCX_TLS=sm then UCX_TLS=tcp, one server + one client on 127.0.0.1;
#   threelc-bench ring and ring --one-way (2 ranks) over THREELC_TRANSPORT=tcp, =ucx with
#   UCX_TLS=sm, =ucx with UCX_TLS=tcp;
#   threelc-bench allreduce --compression threelc (3LC push_pull) at each rank count, over the
#   same three transports.
# Prints every JSON line (each with "transport" and "ucx_tls" added), then markdown tables of the
# medians over the rounds with ratios to the TCP transport and to ucx_perftest.
#   tools/bench/ucx_vs_tcp.sh                       # sizes 1 16 100 (MiB), ranks 2 4, 1 round
#   ROUNDS=3 tools/bench/ucx_vs_tcp.sh
#   BUILD_DIR=/tmp/build SIZES="16" RANKS="2" tools/bench/ucx_vs_tcp.sh
# SM_TLS (default "sm", UCX's alias of its shared-memory transports: posix, sysv, cma, ...) and
# NET_TLS (default "tcp") are the two UCX_TLS values. COMPRESSIONS="threelc none" also runs the
# uncompressed allreduce. Iterations: the ring's default (1 GiB per size, at least 5);
# allreduce <= 4 MiB 20, larger 15 (ITERS=N forces one count); ucx_perftest 1 GiB per size
# (10..1000 messages) after a tenth as many warm-up messages.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${BUILD_DIR:-$root/build}
bench="$build/bin/threelc-bench"
run="$root/tools/threelcrun"
python=/usr/bin/python3
[[ -x "$bench" ]] || { echo "ucx_vs_tcp: build $bench first (tools/build.sh)" >&2; exit 1; }
command -v ucx_perftest >/dev/null ||
  { echo "ucx_vs_tcp: ucx_perftest is not installed (ucx-utils, tools/setup.sh --tests)" >&2; exit 1; }

sizes_list=${SIZES:-1 16 100}
ranks_list=${RANKS:-2 4}
rounds=${ROUNDS:-1}
sm_tls=${SM_TLS:-sm}
net_tls=${NET_TLS:-tcp}
compressions=${COMPRESSIONS:-threelc}
sizes_csv=$(tr ' ' ',' <<<"$sizes_list")
# transport name : UCX_TLS ("-" for the TCP transport)
configs=("tcp:-" "ucx:$sm_tls" "ucx:$net_tls")

iters_for() {
  if [[ -n "${ITERS:-}" ]]; then echo "$ITERS"; return; fi
  "$python" -c 'import sys; s = float(sys.argv[1]); print(20 if s <= 4 else 15)' "$1"
}

free_port() { "$python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# Rank 0's JSON lines, without threelcrun's "[0] " prefix, tagged with the transport.
tag() {
  sed -n 's/^\[0\] \({.*}\)$/\1/p' |
    "$python" -c '
import json, sys
for line in sys.stdin:
    r = json.loads(line)
    r["transport"], r["ucx_tls"] = sys.argv[1], (None if sys.argv[2] == "-" else sys.argv[2])
    print(json.dumps(r))' "$1" "$2"
}

# A threelcrun job over transport $1 (UCX_TLS $2, "-": the TCP transport); the rest is the
# command. A job that fails is reported on stderr and leaves its cells of the table empty.
job() {
  local transport=$1 tls=$2 out
  shift 2
  if [[ $tls == - ]]; then
    out=$(env -u UCX_TLS THREELC_TRANSPORT="$transport" "$run" "$@" 2>&1) || true
  else
    out=$(env UCX_TLS="$tls" THREELC_TRANSPORT="$transport" "$run" "$@" 2>&1) || true
  fi
  grep -q '^\[0\] {' <<<"$out" ||
    { echo "ucx_vs_tcp: THREELC_TRANSPORT=$transport UCX_TLS=$tls $*: failed:" >&2
      tail -n 5 <<<"$out" >&2; return 0; }
  tag "$transport" "$tls" <<<"$out"
}

# ucx_perftest -t tag_bw of $2 MiB messages with UCX_TLS=$1: one JSON line.
perftest() {
  local tls=$1 mib=$2 port bytes n w server out=""
  bytes=$("$python" -c 'import sys; print(int(float(sys.argv[1]) * 2**20))' "$mib")
  n=$("$python" -c 'import sys; print(max(10, min(1000, 2**30 // int(sys.argv[1]))))' "$bytes")
  w=$(( n / 10 > 2 ? n / 10 : 2 ))
  port=$(free_port)
  UCX_TLS=$tls ucx_perftest -p "$port" >/dev/null 2>&1 &
  server=$!
  for _ in 1 2 3 4 5 6 7 8 9 10; do
    sleep 0.3
    if out=$(UCX_TLS=$tls ucx_perftest 127.0.0.1 -p "$port" -t tag_bw -s "$bytes" -n "$n" \
               -w "$w" -f -v 2>&1); then
      break
    fi
    out=""
  done
  wait "$server" || true
  [[ -n $out ]] || { echo "ucx_vs_tcp: ucx_perftest UCX_TLS=$tls -s $bytes failed" >&2; return 0; }
  # -f -v: a CSV header, then "iterations,p50 lat,avg lat,overall lat,avg bw,overall bw,..."
  # with bandwidths in MB/s of 2^20 bytes.
  TLS=$tls BYTES=$bytes "$python" -c '
import json, os, sys
rows = [l.strip().split(",") for l in sys.stdin if l.strip() and l.strip()[0].isdigit()]
it, _, _, _, _, bw = rows[-1][:6]
print(json.dumps({"op": "ucx_perftest_tag_bw", "bytes": int(os.environ["BYTES"]), "iters": int(it),
                  "gbps": round(float(bw) * 2**20 / 1e9, 4), "ranks": 2, "transport": "ucx_perftest",
                  "ucx_tls": os.environ["TLS"]}))' <<<"$out"
}

records=$(mktemp)
trap 'rm -f "$records"' EXIT
for ((round = 1; round <= rounds; ++round)); do
  for tls in "$sm_tls" "$net_tls"; do
    for size in $sizes_list; do perftest "$tls" "$size" | tee -a "$records"; done
  done
  for config in "${configs[@]}"; do
    job "${config%%:*}" "${config#*:}" -np 2 "$bench" ring --sizes "$sizes_csv" --json |
      tee -a "$records"
    job "${config%%:*}" "${config#*:}" -np 2 "$bench" ring --one-way --sizes "$sizes_csv" --json |
      tee -a "$records"
  done
  for np in $ranks_list; do
    for size in $sizes_list; do
      iters=$(iters_for "$size")
      for compression in $compressions; do
        for config in "${configs[@]}"; do
          job "${config%%:*}" "${config#*:}" -np "$np" "$bench" allreduce \
            --compression "$compression" --size-mb "$size" --iters "$iters" --warmup 1 --json "$@" |
            tee -a "$records"
        done
      done
    done
  done
done

SM_TLS=$sm_tls NET_TLS=$net_tls "$python" - "$records" <<'EOF'
import json, os, statistics, sys
from collections import defaultdict

sm, net = os.environ["SM_TLS"], os.environ["NET_TLS"]
runs = defaultdict(list)  # (op, ranks, bytes, transport, ucx_tls[, compression]) -> [value]
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r["op"] == "allreduce":
        runs[("allreduce", r["ranks"], r["bytes"], r["transport"], r["ucx_tls"],
              r["compression"])].append(r["time_s_median"])
    else:
        runs[(r["op"], r["bytes"], r["transport"], r["ucx_tls"])].append(r["gbps"])

def med(*key):
    values = runs.get(key)
    return statistics.median(values) if values else None

def cell(value, *ratios, unit_digits=3):
    if value is None:
        return "-"
    parts = [f"{x:.2f}x {name}" for x, name in ratios if x is not None]
    return f"{value:.{unit_digits}f}" + (f" ({', '.join(parts)})" if parts else "")

def ratio(a, b):
    return a / b if a is not None and b else None

sizes = sorted({k[1] for k in runs if k[0] in ("ring", "one_way")})
print()
print(f"Transport throughput, GB/s per link (1 GB = 1e9 B), median of "
      f"{max((len(v) for v in runs.values()), default=0)} round(s); ring: 2 ranks each sending "
      f"and receiving at once; one_way: rank 0 -> rank 1 only, the pattern of ucx_perftest.")
print()
print(f"| pattern | MiB | TCP transport | UCX {sm} (x TCP, x perftest) | UCX {net} (x TCP, x perftest) "
      f"| ucx_perftest {sm} | ucx_perftest {net} |")
print("| --- | --- | --- | --- | --- | --- | --- |")
for op in ("ring", "one_way"):
    for b in sizes:
        tcp = med(op, b, "tcp", None)
        u_sm, u_net = med(op, b, "ucx", sm), med(op, b, "ucx", net)
        p_sm = med("ucx_perftest_tag_bw", b, "ucx_perftest", sm)
        p_net = med("ucx_perftest_tag_bw", b, "ucx_perftest", net)
        print(f"| {op} | {b / 2**20:g} | {cell(tcp)} "
              f"| {cell(u_sm, (ratio(u_sm, tcp), 'TCP'), (ratio(u_sm, p_sm), 'perftest'))} "
              f"| {cell(u_net, (ratio(u_net, tcp), 'TCP'), (ratio(u_net, p_net), 'perftest'))} "
              f"| {cell(p_sm)} | {cell(p_net)} |")

keys = sorted({(k[1], k[2], k[5]) for k in runs if k[0] == "allreduce"})
if keys:
    print()
    print("threelc-bench allreduce, median seconds per call (each run's median over its calls), "
          "median over the rounds; ratio to the TCP transport.")
    print()
    print(f"| compression | ranks | MiB | TCP transport s | UCX {sm} s (x TCP) | UCX {net} s (x TCP) |")
    print("| --- | --- | --- | --- | --- | --- |")
    for ranks, b, compression in keys:
        tcp = med("allreduce", ranks, b, "tcp", None, compression)
        u_sm = med("allreduce", ranks, b, "ucx", sm, compression)
        u_net = med("allreduce", ranks, b, "ucx", net, compression)
        print(f"| {compression} | {ranks} | {b / 2**20:g} | {cell(tcp, unit_digits=4)} "
              f"| {cell(u_sm, (ratio(u_sm, tcp), 'TCP'), unit_digits=4)} "
              f"| {cell(u_net, (ratio(u_net, tcp), 'TCP'), unit_digits=4)} |")

b16 = 16 * 2**20
tcp16, sm16 = med("ring", b16, "tcp", None), med("ring", b16, "ucx", sm)
if tcp16 and sm16:
    verdict = "met" if sm16 >= 2 * tcp16 else "not met"
    print()
    print(f"Target (UCX {sm} ring >= 2x the TCP transport's ring at 16 MiB): {verdict}, "
          f"{sm16:.3f} / {tcp16:.3f} GB/s = {sm16 / tcp16:.2f}x")
EOF
