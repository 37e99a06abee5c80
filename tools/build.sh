#!/usr/bin/env bash
# Configures and builds threelc into build/ at the repository root (Release by default;
# pass extra CMake arguments through, e.g. -DCMAKE_BUILD_TYPE=Debug). CMake keeps what it was
# given in build/: -DTHREELC_BUILD_TESTS=OFF builds the library and tools without the tests
# (and needs no GoogleTest), =ON with them; tools/run_demo.sh configures a fresh build/ with
# OFF, tools/run_tests.sh always with ON.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
generator=()
command -v ninja >/dev/null && [[ ! -f "$root/build/Makefile" ]] && generator=(-G Ninja)
cmake -S "$root" -B "$root/build" "${generator[@]}" "$@"
cmake --build "$root/build" --parallel "$(nproc)"
