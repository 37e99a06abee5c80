#!/usr/bin/env bash
# Fails when a tracked C++ file does not follow .clang-format.
set -euo pipefail
cd "$(dirname "$0")/../.."
mapfile -t files < <(git ls-files -- '*.c' '*.cc' '*.h' '*.cu' '*.cuh' 2>/dev/null || find . -name '*.cc' -o -name '*.h')
((${#files[@]} == 0)) && { echo "format: no files"; exit 0; }
clang-format --dry-run -Werror "${files[@]}"
echo "format: ${#files[@]} files follow .clang-format"
