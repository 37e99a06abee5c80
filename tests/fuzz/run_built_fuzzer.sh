#!/usr/bin/env bash
# Runs a built libFuzzer binary OUT_DIR/NAME for SECONDS on a scratch copy of the seed corpus
# tests/fuzz/corpus/CORPUS/ (the committed seeds never change). Exits non-zero on any crash,
# leak, sanitizer report or failed property; the reproducer is left in OUT_DIR/artifacts/.
#
#   tests/fuzz/run_built_fuzzer.sh NAME CORPUS OUT_DIR SECONDS MAX_LEN RSS_LIMIT_MB
#
# Environment: FUZZ_ARGS (extra libFuzzer flags, e.g. "-seed=1").
set -euo pipefail
if (($# != 6)); then
  echo "usage: $0 NAME CORPUS OUT_DIR SECONDS MAX_LEN RSS_LIMIT_MB" >&2
  exit 2
fi
name=$1 corpus=$2 out=$3 seconds=$4 max_len=$5 rss=$6
root=$(cd "$(dirname "$0")/../.." && pwd)

rm -rf "$out/corpus" && mkdir -p "$out/corpus" "$out/artifacts"
cp "$root/tests/fuzz/corpus/$corpus"/* "$out/corpus/"
echo "fuzz: running $out/$name for ${seconds}s on $(ls "$out/corpus" | wc -l) seeds"
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
set +e
# shellcheck disable=SC2086  # FUZZ_ARGS is a list of flags
"$out/$name" -max_total_time="$seconds" -timeout=20 -rss_limit_mb="$rss" -max_len="$max_len" \
  -print_final_stats=1 -artifact_prefix="$out/artifacts/" ${FUZZ_ARGS:-} "$out/corpus" \
  >"$out/fuzz.log" 2>&1
status=$?
set -e
grep -vE '^#[0-9]+\s+(NEW|REDUCE|pulse)' "$out/fuzz.log" | tail -n 60
if ((status != 0)); then
  echo "fuzz: $name failed (exit $status); reproducer in $out/artifacts/" >&2
  exit 1
fi
echo "fuzz: no crash in ${seconds}s"
