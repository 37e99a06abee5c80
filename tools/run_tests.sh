#!/usr/bin/env bash
# The README's test command: install what is missing, build, run the whole suite with ctest
# (GoogleTest, pytest, the bounded libFuzzer run, clang-format and clang-tidy checks), then the
# ASan + UBSan build (build-asan/, CMakePresets.json) and its C++ suites: every test but the
# Python-hosted ones (label python-hosted), which `tools/sanitize_tests.sh asan-ubsan` runs too.
# Only with THREELC_SANITIZE=1: CI leaves it out for now (its ~10 minutes on 2 cores would take CI
# past its 30-minute budget).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/tools/setup.sh"
"$root/tools/build.sh"
ctest --test-dir "$root/build" --output-on-failure --timeout 600 "$@"
if [[ "${THREELC_SANITIZE:-0}" != 0 ]]; then
  "$root/tools/sanitize_tests.sh" asan-ubsan -LE python-hosted
fi
