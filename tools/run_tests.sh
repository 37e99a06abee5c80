#!/usr/bin/env bash
# The README's test command: install what is missing, build, run the whole suite with ctest
# (GoogleTest, pytest, the bounded libFuzzer run, clang-format and clang-tidy checks).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/tools/setup.sh"
"$root/tools/build.sh"
ctest --test-dir "$root/build" --output-on-failure --timeout 600 "$@"
