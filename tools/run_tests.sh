#!/usr/bin/env bash
# The test command (and CI's, .ci/run): install everything the tests need (tools/setup.sh
# --tests: the main set and the tests' set), make the torch 2.13 virtual environment
# (build/venv-torch2, before the build configures the suites that run in it), build with the
# tests (tools/build.sh -DTHREELC_BUILD_TESTS=ON), then run the suite in two parts so that each
# test runs once (2-core CI has 30 minutes):
#  1. the Release build (build/): every test that is not a GoogleTest case (ctest names without
#     a '.': the Python-hosted suites, the fuzzers, the Release-only sanitized tests,
#     clang-format and clang-tidy; the torch suites on Debian's torch 1.13 and, as *_torch2,
#     on torch 2.13 in build/venv-torch2) and the GPU cases (label gpu; they skip without a
#     GPU);
#  2. the ASan + UBSan build (build-asan/, CMakePresets.json) and every GoogleTest case in it
#     (tools/dev/sanitize_tests.sh asan-ubsan -LE python-hosted).
# The set-up steps print one line each, their output in build/logs/<step>.log (setup, venv,
# build; its last 40 lines when a step fails: tools/lib/quietly.sh, THREELC_VERBOSE=1 shows
# everything); ctest's output is shown as it runs.
# THREELC_SANITIZE=0: the whole suite in the Release build instead, and no ASan build.
# Arguments go to every ctest run (e.g. -R fault). Fails if any part failed; runs them all.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
threelc_root=$root
# shellcheck source=lib/quietly.sh
. "$root/tools/lib/quietly.sh"

"$root/tools/setup.sh" --tests
quietly venv "run_tests: making the torch 2.13 environment build/venv-torch2" \
  "$root/tools/torch2_venv.sh"
quietly build "run_tests: building into build/ with the tests" \
  "$root/tools/build.sh" -DTHREELC_BUILD_TESTS=ON
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
