#!/usr/bin/env bash
# clang-tidy (with .clang-tidy) on the C++ sources changed recently: since the newest commit
# made more than THREELC_LINT_HOURS (default 4) before HEAD's, plus uncommitted ones; every
# source when the history is younger than that. Counted from HEAD's commit time, not the clock:
# a working session (3 hours) is covered however late CI runs. Compile flags from the build's
# compile_commands.json (written for gcc: clang is told to ignore gcc-only warning options such
# as -Wno-restrict).
# Usage: tools/dev/lint_changed.sh [build-dir]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
cd "$root"
if ! git rev-parse --git-dir >/dev/null 2>&1; then
  echo "lint: not a git checkout, nothing to compare"; exit 0
fi
since=$(($(git log -1 --format=%ct HEAD) - ${THREELC_LINT_HOURS:-4} * 3600))
base=$(git rev-list -1 --before="$since" HEAD 2>/dev/null || true)
if [[ -n "$base" ]]; then
  changed=$(git diff --name-only "$base" -- '*.cc')
else
  changed=$(git ls-files -- '*.cc')
fi
changed+=$'\n'$(git ls-files --others --exclude-standard -- '*.cc')
files=()
for file in $changed; do
  [[ -f "$file" ]] && grep -q "\"file\": \"[^\"]*/$file\"" "$build/compile_commands.json" && files+=("$file")
done
if ((${#files[@]} == 0)); then
  echo "lint: no changed C++ source in the build"; exit 0
fi
echo "lint: clang-tidy on ${files[*]}"
printf '%s\n' "${files[@]}" | xargs -P "$(nproc)" -n 1 clang-tidy --quiet -p "$build" \
  --extra-arg=-Wno-unknown-warning-option
