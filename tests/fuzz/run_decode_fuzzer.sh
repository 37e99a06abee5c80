#!/usr/bin/env bash
# Builds the block-decode libFuzzer target with clang++-14 (libFuzzer + ASan + UBSan) into
# OUT_DIR and runs it for SECONDS (default 30) on a scratch copy of the seed corpus
# tests/fuzz/corpus/decode/. Exits non-zero on a build failure or on any crash, leak, sanitizer
# report or failed property; the reproducer is left in OUT_DIR/artifacts/.
#
#   tests/fuzz/run_decode_fuzzer.sh OUT_DIR [SECONDS]
#
# Environment: THREELC_AVX2_FLAGS and THREELC_AVX512_FLAGS (the kernel files' -m flags, which
# ctest passes from the top-level CMakeLists.txt), CLANGXX (default clang++-14), FUZZ_JOBS (parallel compiles, default 2),
# FUZZ_ARGS (extra libFuzzer flags, e.g. "-seed=1 -max_len=8192").
set -euo pipefail

if (($# < 1)); then
  echo "usage: $0 OUT_DIR [SECONDS]" >&2
  exit 2
fi
root=$(cd "$(dirname "$0")/../.." && pwd)
out=$(mkdir -p "$1" && cd "$1" && pwd)
seconds=${2:-30}
cxx=${CLANGXX:-clang++-14}
jobs=${FUZZ_JOBS:-2}

flags=(-std=c++20 -O1 -g -fno-omit-frame-pointer -ffp-contract=off
       -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all
       -I"$root/compression/include" -I"$root/compression/src")
declare -A extra=(
  [kernels_avx2]="${THREELC_AVX2_FLAGS:?the kernel flags come from ctest (tests/CMakeLists.txt)}"
  [kernels_avx512]="${THREELC_AVX512_FLAGS:?the kernel flags come from ctest (tests/CMakeLists.txt)}"
)

# Compile each translation unit (only the ones whose source or headers changed), then link.
mkdir -p "$out/obj"
sources=("$root"/compression/src/*.cc "$root/tests/fuzz/decode_fuzzer.cc")
headers=("$root"/compression/include/threelc/compression/*.h "$root"/compression/src/*.h)
objects=()
pids=()
for src in "${sources[@]}"; do
  name=$(basename "$src" .cc)
  obj="$out/obj/$name.o"
  objects+=("$obj")
  stale=0
  [[ -f "$obj" && "$obj" -nt "$0" ]] || stale=1
  for dep in "$src" "${headers[@]}"; do [[ "$dep" -nt "$obj" ]] && stale=1; done
  ((stale)) || continue
  # shellcheck disable=SC2086  # the per-file -m flags are meant to split
  "$cxx" "${flags[@]}" ${extra[$name]:-} -c "$src" -o "$obj.tmp" && mv "$obj.tmp" "$obj" &
  pids+=($!)
  if ((${#pids[@]} >= jobs)); then
    wait "${pids[0]}" || { echo "fuzz: compiling failed" >&2; exit 1; }
    pids=("${pids[@]:1}")
  fi
done
for pid in "${pids[@]}"; do wait "$pid" || { echo "fuzz: compiling failed" >&2; exit 1; }; done
"$cxx" "${flags[@]}" "${objects[@]}" -o "$out/decode_fuzzer"

# Fuzz a scratch copy so that the committed seeds never change.
rm -rf "$out/corpus" && mkdir -p "$out/corpus" "$out/artifacts"
cp "$root"/tests/fuzz/corpus/decode/* "$out/corpus/"
echo "fuzz: running $out/decode_fuzzer for ${seconds}s on $(ls "$out/corpus" | wc -l) seeds"
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
set +e
# shellcheck disable=SC2086  # FUZZ_ARGS is a list of flags
"$out/decode_fuzzer" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=4096 -max_len=65536 \
  -print_final_stats=1 -artifact_prefix="$out/artifacts/" ${FUZZ_ARGS:-} "$out/corpus" \
  >"$out/fuzz.log" 2>&1
status=$?
set -e
grep -vE '^#[0-9]+\s+(NEW|REDUCE|pulse)' "$out/fuzz.log" | tail -n 80
if ((status != 0)); then
  echo "fuzz: decode_fuzzer failed (exit $status); reproducer in $out/artifacts/" >&2
  exit 1
fi
echo "fuzz: no crash in ${seconds}s"
