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
       -I"$root/compression/include" -I"$root/compression/src" -I"$root/settings/include")
declare -A extra=(
  [kernels_avx2]="${THREELC_AVX2_FLAGS:?the kernel flags come from ctest (tests/CMakeLists.txt)}"
  [kernels_avx512]="${THREELC_AVX512_FLAGS:?the kernel flags come from ctest (tests/CMakeLists.txt)}"
)

# Compile each translation unit (only the ones whose source or headers changed), then link.
mkdir -p "$out/obj"
sources=("$root"/compression/src/*.cc "$root"/settings/src/*.cc "$root/tests/fuzz/decode_fuzzer.cc")
headers=("$root"/compression/include/threelc/compression/*.h "$root"/compression/src/*.h
         "$root"/settings/include/threelc/settings/*.h)
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

exec "$root/tests/fuzz/run_built_fuzzer.sh" decode_fuzzer decode "$out" "$seconds" 65536 4096
