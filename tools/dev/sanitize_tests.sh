#!/usr/bin/env bash
# tools/dev/sanitize_tests.sh PRESET [ctest args...]
#
# Configures and builds a sanitizer preset of CMakePresets.json and runs its test suite:
#   asan-ubsan  AddressSanitizer + LeakSanitizer + UndefinedBehaviorSanitizer, in build-asan/
#   tsan        ThreadSanitizer, in build-tsan/
# The Release build in build/ is not touched. Extra arguments go to ctest, e.g.
#   tools/dev/sanitize_tests.sh asan-ubsan -LE python-hosted  # the subset CI runs
#   tools/dev/sanitize_tests.sh tsan -R 'PushPull' -j 2
#
# Every report of a sanitizer (in any process: test binaries, probes, Python ranks) is written
# to <build dir>/sanitizer-logs/ as well as failing its process; the run fails when any report
# was written, even where a test tolerated the process's failure, and the reports are printed.
# Suppressions (tools/dev/sanitizers/*.supp) cover third-party code only.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
usage="usage: tools/dev/sanitize_tests.sh asan-ubsan|tsan [ctest args...]"
(($# >= 1)) || { echo "$usage" >&2; exit 2; }
preset=$1
shift
case "$preset" in
  asan-ubsan) build="$root/build-asan" ;;
  tsan) build="$root/build-tsan" ;;
  *) echo "$usage" >&2; exit 2 ;;
esac
cd "$root"

start=$SECONDS
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset" --parallel "${THREELC_BUILD_JOBS:-2}"
echo "sanitize_tests: $preset built in $((SECONDS - start)) s"

logs="$build/sanitizer-logs"
rm -rf "$logs"
mkdir -p "$logs"
supp="$root/tools/dev/sanitizers"
# halt_on_error: the first report ends the process (UBSan too: -fno-sanitize-recover=all);
# log_path: <logs>/<tool>.<pid>, so that a report of a rank whose exit a test expected is
# still seen.
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:log_path=$logs/ubsan:suppressions=$supp/ubsan.supp"
case "$preset" in
  asan-ubsan)
    # detect_leaks=1 for the C++ binaries; tests/sanitizers.cmake appends detect_leaks=0 for
    # the Python-hosted tests.
    export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:check_initialization_order=1:strict_init_order=1:detect_stack_use_after_return=1:log_path=$logs/asan"
    export LSAN_OPTIONS="suppressions=$supp/lsan.supp:print_suppressions=0"
    ;;
  tsan)
    export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:history_size=4:log_path=$logs/tsan:suppressions=$supp/tsan.supp"
    # UCX's memory hooks (libucm) patch mmap / madvise; glibc's madvise of a finished thread's
    # stack then enters ucm_event_enter's rwlock after TSan dropped the thread's state, and
    # every process that links UCX crashes at its first thread exit (SIGSEGV in
    # __tsan::MutexPreReadLock). threelc registers no memory with UCX: turn the hooks off.
    export UCX_MEM_MMAP_HOOK_MODE=none UCX_MEM_MALLOC_HOOKS=no
    ;;
esac

# Left out under the sanitizers (the Release suite runs it): label lint (clang_format,
# clang_tidy_changed), static checks of the sources in which no code of ours runs. The fuzz
# tests are not built here (THREELC_FUZZ=OFF in the presets).
# Ranks that threelcrun starts over ssh (tests/tools/threelcrun/test_ssh.py, tests/tools/eval)
# get the runtime and these options through threelcrun -x (tests/support/sanitized_ranks.py); the
# emulate suite keeps it away from everything else it starts, since procps-ng's tools (pgrep,
# ps) never start with libasan.so preloaded (they wait forever in textdomain() for glibc's
# _nl_state_lock), and skips its tools/eval/evaluate case, a benchmark.
exclude='^(lint)$'
# ctest takes one -LE: a caller's is joined to ours (e.g. -LE python-hosted, CI's subset).
args=()
while (($# > 0)); do
  case "$1" in
    -LE|--label-exclude) exclude+="|$2"; shift 2 ;;
    *) args+=("$1"); shift ;;
  esac
done
status=0
# ctest prints a test's line only when it ends: the Python-hosted suites run for minutes each
# without output (engine_job_tests about 11 minutes under ASan on 2 cores; tests/sanitizers.cmake).
ctest --preset "$preset" -LE "$exclude" "${args[@]}" || status=$?

reports=("$logs"/*)
if [[ -e "${reports[0]}" ]]; then
  echo "sanitize_tests: ${#reports[@]} sanitizer report(s) in $logs:" >&2
  for report in "${reports[@]}"; do
    echo "===== $report" >&2
    cat "$report" >&2
  done
  ((status != 0)) || status=1
fi
echo "sanitize_tests: $preset: $([[ $status == 0 ]] && echo passed || echo FAILED)" \
     "in $((SECONDS - start)) s (build included)"
exit "$status"
