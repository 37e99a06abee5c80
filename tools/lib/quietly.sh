# Sourced by the user's commands (tools/setup.sh, run_demo.sh, run_tests.sh) to run a long, noisy
# step with its output in a log file instead of on the terminal:
#
#   quietly NAME DESCRIPTION COMMAND [ARGS...]
#
# prints "DESCRIPTION (log: build/logs/NAME.log)", runs COMMAND with stdout and stderr written
# to that log (replacing the previous run's), and returns its exit status. When it fails, the
# log's last THREELC_LOG_TAIL lines (default 40) and the log's path go to stderr.
# THREELC_VERBOSE=1 runs COMMAND with its output on the terminal as well (and in the log).
# Logs are in THREELC_LOG_DIR, default build/logs of the checkout.

threelc_root=${threelc_root:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
threelc_log_dir=${THREELC_LOG_DIR:-$threelc_root/build/logs}

# The path to show: relative to the checkout when the log is inside it.
threelc_log_path() {
  local log="$threelc_log_dir/$1.log"
  if [[ $log == "$threelc_root"/* ]]; then echo "${log#"$threelc_root"/}"; else echo "$log"; fi
}

quietly() {
  local name=$1 description=$2
  shift 2
  local log="$threelc_log_dir/$name.log" shown status=0
  shown=$(threelc_log_path "$name")
  mkdir -p "$threelc_log_dir"
  echo "$description (log: $shown)"
  if [[ ${THREELC_VERBOSE:-0} == 1 ]]; then
    "$@" 2>&1 | tee "$log" || status=${PIPESTATUS[0]}
  else
    "$@" >"$log" 2>&1 || status=$?
  fi
  if ((status != 0)); then
    {
      echo "---- last ${THREELC_LOG_TAIL:-40} lines of $shown ----"
      tail -n "${THREELC_LOG_TAIL:-40}" "$log"
      echo "---- failed (exit status $status): $description; the whole log: $log ----"
    } >&2
  fi
  return "$status"
}
