#!/usr/bin/env bash
# Creates the virtual environment the torch 2 suites (and examples) run in, and prints its
# python: build/venv-torch2 (or the directory given), made with THREELC_VENV_PYTHON (default:
# the python3.11 first on PATH; the packaging tests make theirs with the same one), holding torch 2.13.0 (its CPU build: this machine's pip takes it from local disk; a bare
# `pip install torch` would fetch a CUDA build of several GB), numpy, pytest and
# pytorch_lightning 2.6.6 and Hugging Face transformers 5.25.0 (the transformer example's
# GPT-2). Idempotent: a venv that already holds exactly these requirements is
# left alone and the network is not touched; one that holds others is made afresh.
# Debian's /usr/bin/python3 keeps its own torch 1.13 (python3-torch) for the other suites.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv=${1:-$root/build/venv-torch2}
requirements=(torch==2.13.0 numpy==2.4.6 pytest==9.1.1 pytorch_lightning==2.6.6
              transformers==5.25.0)
stamp="$venv/threelc-requirements.txt"
wanted=$(printf '%s\n' "${requirements[@]}")

if [[ -x "$venv/bin/python" && -f "$stamp" && "$(cat "$stamp")" == "$wanted" ]]; then
  echo "$venv/bin/python"
  exit 0
fi
python=${THREELC_VENV_PYTHON:-$(command -v python3.11 || true)}
if [[ -z "$python" ]]; then
  echo "torch2_venv: python3.11 not found on PATH and THREELC_VENV_PYTHON not set (torch" \
       "2.13's CPU wheel here is built for CPython 3.11; on Debian 12: apt-get install" \
       "python3.11-venv)" >&2
  exit 1
fi
if [[ -e "$venv" && ! -f "$venv/pyvenv.cfg" && -n "$(ls -A "$venv" 2>/dev/null)" ]]; then
  echo "torch2_venv: $venv exists and is not a virtual environment (no pyvenv.cfg): not" \
       "replacing it; name another directory" >&2
  exit 1
fi
echo "torch2_venv: creating $venv (${requirements[*]})" >&2
rm -rf "$venv"
"$python" -m venv "$venv" >&2 || {
  echo "torch2_venv: '$python -m venv' failed (on Debian: apt-get install python3.11-venv)" >&2
  exit 1
}
"$venv/bin/python" -m pip install --quiet "${requirements[@]}" >&2
printf '%s\n' "${requirements[@]}" >"$stamp"
echo "$venv/bin/python"
