#!/usr/bin/env bash
# Installs the Debian packages (Debian 12 or 13; root or sudo) that threelc needs, in two sets:
#
#   tools/setup.sh           the main set: what building the library and the main job
#                            (tools/run_demo.sh: the Fashion-MNIST example on torch 2.13) need
#   tools/setup.sh --tests   the main set and the tests' set: what the test suite
#                            (tools/run_tests.sh, CI), the benchmarks, the evaluation tools and
#                            the other examples need
#
# Idempotent: when every package of the chosen sets is present it changes nothing and does not
# touch the network. apt's output goes to build/logs/setup.log (tools/lib/quietly.sh: its tail
# is printed when apt fails; THREELC_VERBOSE=1 shows all of it).
# CUDA is not installed here: it is on the machine image (/usr/local/cuda) or absent.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
threelc_root=$root
# shellcheck source=lib/quietly.sh
. "$root/tools/lib/quietly.sh"

main_packages=(
  # the library's build: CMake and Ninja, a C++20 compiler, Boost.Asio (headers), OpenSSL's
  # libcrypto; ccache, through which a second build of the same sources (the wheel of
  # tests/packaging, pip install .) reuses the first one's objects
  cmake ninja-build g++ pkg-config libboost-dev libssl-dev ccache
  # the main job's Python side: Debian's python3 (threelcrun), venv for build/venv-torch2 and
  # the environments `pip install .` goes into (docs/INSTALL.md), numpy for the codec's and the
  # engine's numpy examples on /usr/bin/python3
  python3 python3-venv python3-numpy
  # the main job's data: Fashion-MNIST (/usr/share/datasets/fashion-mnist)
  dataset-fashion-mnist
)

test_packages=(
  # the C++ tests: GoogleTest; libFuzzer (clang + its runtime); lint
  libgtest-dev clang-14 libclang-rt-14-dev clang-tidy clang-format
  # transport and launcher tests: a real sshd on loopback, iperf3 as the benchmark baseline
  openssh-server openssh-client iperf3 procps
  # THREELC_TRANSPORT=ucx: UCX (headers, libraries, its CMake config; without it the library
  # builds TCP-only) and ucx_perftest, the UCX benchmark's baseline
  libucx-dev ucx-utils
  # the DDP example measures every socket's bytes with ss; tools/eval/emulate_cluster (ip netns,
  # tc) and tools/eval/evaluate's baselines (Open MPI through mpi4py) and plots (matplotlib)
  iproute2 openmpi-bin python3-mpi4py python3-matplotlib
  # tests/launchers: a throwaway single-node Slurm cluster (the daemons are not started or
  # configured here: the tests start their own with a slurm.conf of their own) and Slurm's
  # PMI-2 library; libpmix-dev at run time too, since Slurm's mpi/pmix plugin dlopens the
  # unversioned libpmix.so that only it ships
  slurmd slurmctld slurm-client munge libpmix-dev "libpmi2-0|libpmi2-0t64"
  # the suites on Debian's torch 1.13 (/usr/bin/python3) and pytest; tools/torchrun
  python3-torch python3-pytest
  # the transformer examples' text: the Python documentation's reST sources
  # (/usr/share/doc/python3/html/_sources)
  python3-doc
)

usage() {
  sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"
}

set_label="the main set"
packages=("${main_packages[@]}")
for argument in "$@"; do
  case $argument in
    --tests) set_label="the main and tests' sets"; packages=("${main_packages[@]}" "${test_packages[@]}") ;;
    -h|--help) usage; exit 0 ;;
    *) echo "setup: unknown argument '$argument' (tools/setup.sh [--tests])" >&2; exit 2 ;;
  esac
done

# An entry "a|b" is one package under either name (Debian 13 renamed some libraries, "t64"):
# present when either is installed, installed under the first name apt knows.
installed() { [[ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null || true)" == "install ok installed" ]]; }
missing=()
for entry in "${packages[@]}"; do
  present=false
  for name in ${entry//|/ }; do
    if installed "$name"; then present=true; fi
  done
  $present || missing+=("$entry")
done

if ((${#missing[@]} == 0)); then
  echo "setup: all ${#packages[@]} packages of $set_label present"
  exit 0
fi

sudo=()
if ((EUID != 0)); then
  command -v sudo >/dev/null || { echo "setup: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive

# apt-get update, then each missing entry under the first of its names that apt knows.
install_missing() {
  "${sudo[@]}" apt-get update
  local names=() entry name chosen
  for entry in "${missing[@]}"; do
    chosen=""
    for name in ${entry//|/ }; do
      if [[ -z "$chosen" ]] && apt-cache show "$name" >/dev/null 2>&1; then chosen=$name; fi
    done
    [[ -n "$chosen" ]] || { echo "setup: no package named ${entry//|/ or } in apt's lists" >&2; return 1; }
    names+=("$chosen")
  done
  echo "setup: apt-get install ${names[*]}"
  "${sudo[@]}" apt-get install -y --no-install-recommends "${names[@]}"
}

quietly setup "setup: installing ${#missing[@]} package(s) missing from $set_label" \
  install_missing
