#!/usr/bin/env bash
# Builds the transport frame-header libFuzzer target with clang++-14 (libFuzzer + ASan + UBSan)
# into OUT_DIR and runs it for SECONDS (default 20) on a scratch copy of the seed corpus
# tests/fuzz/corpus/frame/. Exits non-zero on a build failure or on any crash, sanitizer report
# or failed property; the reproducer is left in OUT_DIR/artifacts/.
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

# Fuzz a scratch copy so that the committed seeds never change.
rm -rf "$out/corpus" && mkdir -p "$out/corpus" "$out/artifacts"
cp "$root"/tests/fuzz/corpus/frame/* "$out/corpus/"
echo "fuzz: running $out/frame_fuzzer for ${seconds}s on $(ls "$out/corpus" | wc -l) seeds"
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
set +e
# shellcheck disable=SC2086  # FUZZ_ARGS is a list of flags
"$out/frame_fuzzer" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=2048 -max_len=64 \
  -print_final_stats=1 -artifact_prefix="$out/artifacts/" ${FUZZ_ARGS:-} "$out/corpus" \
  >"$out/fuzz.log" 2>&1
status=$?
set -e
grep -vE '^#[0-9]+\s+(NEW|REDUCE|pulse)' "$out/fuzz.log" | tail -n 40
if ((status != 0)); then
  echo "fuzz: frame_fuzzer failed (exit $status); reproducer in $out/artifacts/" >&2
  exit 1
fi
echo "fuzz: no crash in ${seconds}s"
