#!/usr/bin/env bash
# clang-tidy (with .clang-tidy) on the C++ sources changed by the last commit, or by the
# uncommitted change when there is one; compile flags from build/compile_commands.json.
# Usage: tools/lint_changed.sh [build-dir]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
cd "$root"
if ! git rev-parse --git-dir >/dev/null 2>&1; then
  echo "lint: not a git checkout, nothing to compare"; exit 0
fi
if [[ -n "$(git status --porcelain -- '*.cc' '*.h')" ]]; then
  changed=$(git diff --name-only HEAD -- '*.cc'; git ls-files --others --exclude-standard -- '*.cc')
elif git rev-parse -q --verify HEAD~1 >/dev/null; then
  changed=$(git diff --name-only HEAD~1 HEAD -- '*.cc')
else
  changed=$(git ls-files -- '*.cc')
fi
files=()
for file in $changed; do
  [[ -f "$file" ]] && grep -q "\"file\": \"[^\"]*/$file\"" "$build/compile_commands.json" && files+=("$file")
done
if ((${#files[@]} == 0)); then
  echo "lint: no changed C++ source in the build"; exit 0
fi
echo "lint: clang-tidy on ${files[*]}"
clang-tidy --quiet -p "$build" "${files[@]}"
