#!/usr/bin/env bash
# The main command: install what the main job needs (tools/setup.sh, the main set), build the
# library (tools/build.sh into build/; a fresh build/ is configured without the tests, one
# configured before keeps its choice), make the torch 2.13 virtual environment
# (build/venv-torch2, tools/torch2_venv.sh), then run the main job in it: 4 ranks (NP=N to
# change) training a CNN on Fashion-MNIST with threelc.torch, gradients 3LC-compressed by the
# engine (examples/train_fashion_mnist.py).
#
#   tools/run_demo.sh [ARGUMENTS OF THE EXAMPLE]
#       e.g. --compression none, --sparsity 1.25, --epochs 3, --seed 1, --amp bf16,
#       --model mlp, --epochs 1 --max-steps 20 (a short run)
#
# Each step prints one line; its output goes to build/logs/<step>.log (setup, build, venv),
# and when a step fails the log's last 40 lines are printed (tools/lib/quietly.sh;
# THREELC_VERBOSE=1 shows everything). THREELC_DEMO_PYTHON=/usr/bin/python3 runs the job on
# Debian's torch 1.13 instead (python3-torch: tools/setup.sh --tests installs it).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
threelc_root=$root
# shellcheck source=lib/quietly.sh
. "$root/tools/lib/quietly.sh"

case ${1:-} in
  -h|--help)
    sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"
    echo "The example's own arguments: build/venv-torch2/bin/python examples/train_fashion_mnist.py --help"
    exit 0 ;;
esac

"$root/tools/setup.sh"

build_args=()
if [[ ! -f $root/build/build.ninja && ! -f $root/build/Makefile ]]; then
  build_args=(-DTHREELC_BUILD_TESTS=OFF)   # a fresh build/: the library and tools, no tests
fi
quietly build "run_demo: building into build/" "$root/tools/build.sh" "${build_args[@]}"

if [[ -n ${THREELC_DEMO_PYTHON:-} ]]; then
  python=$THREELC_DEMO_PYTHON
else
  quietly venv "run_demo: making the torch 2.13 environment build/venv-torch2" \
    "$root/tools/torch2_venv.sh"
  python=$root/build/venv-torch2/bin/python
fi

np=${NP:-4}
echo "run_demo: training on $np ranks: tools/threelcrun -np $np ${python#"$root"/}" \
     "examples/train_fashion_mnist.py $*"
exec "$root/tools/threelcrun" -np "$np" "$python" "$root/examples/train_fashion_mnist.py" "$@"
