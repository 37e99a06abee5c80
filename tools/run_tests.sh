#!/usr/bin/env bash
# The README's test command: install what is missing, build, then run the suite in two parts so
# that each test runs once (2-core CI has 30 minutes):
#  1. the Release build (build/): every test that is not a GoogleTest case (ctest names without
#     a '.': the Python-hosted suites, the fuzzers, the Release-only sanitized tests,
#     clang-format and clang-tidy; the torch suites on Debian's torch 1.13 and, as *_torch2,
#     on torch 2.13 in build/venv-torch2, which tools/torch2_venv.sh makes) and the GPU cases
#     (label gpu; they skip without a GPU);
#  2. the ASan + UBSan build (build-asan/, CMakePresets.json) and every GoogleTest case in it
#     (tools/dev/sanitize_tests.sh asan-ubsan -LE python-hosted).
# THREELC_SANITIZE=0: the whole suite in the Release build instead, and no ASan build.
# Arguments go to every ctest run (e.g. -R fault). Fails if any part failed; runs them all.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/tools/setup.sh"
# torch 2.13 in build/venv-torch2, before the build configures the suites that run in it.
"$root/tools/torch2_venv.sh" >/dev/null
"$root/tools/build.sh"
ctest_release() { ctest --test-dir "$root/build" --output-on-failure --timeout 600 "$@"; }
if [[ "${THREELC_SANITIZE:-1}" == 0 ]]; then
  ctest_release "$@"
  exit
fi
status=0
ctest_release -E '\.' "$@" || status=1
ctest_release -L gpu "$@" || status=1
"$root/tools/dev/sanitize_tests.sh" asan-ubsan -LE python-hosted "$@" || status=1
exit $status
