#!/usr/bin/env bash
# Builds the transport frame-header libFuzzer target with clang++-14 (libFuzzer + ASan + UBSan)
# into OUT_DIR and runs it for SECONDS (default 20) on the seeds in tests/fuzz/corpus/frame/
# (run_built_fuzzer.sh). Exits non-zero on a build failure or any finding.
#
#   tests/fuzz/run_frame_fuzzer.sh OUT_DIR [SECONDS]
#
# Environment: CLANGXX (default clang++-14), FUZZ_ARGS (extra libFuzzer flags).
set -euo pipefail

if (($# < 1)); then
  echo "usage: $0 OUT_DIR [SECONDS]" >&2
  exit 2
fi
root=$(cd "$(dirname "$0")/../.." && pwd)
out=$(mkdir -p "$1" && cd "$1" && pwd)
seconds=${2:-20}
cxx=${CLANGXX:-clang++-14}

"$cxx" -std=c++20 -O1 -g -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined \
  -fno-sanitize-recover=all -I"$root/transport/src" \
  "$root/transport/src/frame.cc" "$root/tests/fuzz/frame_fuzzer.cc" -o "$out/frame_fuzzer"

exec "$root/tests/fuzz/run_built_fuzzer.sh" frame_fuzzer frame "$out" "$seconds" 64 2048
