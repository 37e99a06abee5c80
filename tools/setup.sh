#!/usr/bin/env bash
# Installs the Debian packages that threelc's build, tests and demo need. Idempotent: when
# everything is present it changes nothing and does not touch the network.
# CUDA is not installed here: it is on the machine image (/usr/local/cuda) or absent.
set -euo pipefail

packages=(
  # build: compilers, Boost.Asio (headers), OpenSSL's libcrypto; ccache, through which a second
  # build of the same sources (the wheel of tests/packaging) reuses the first one's objects
  cmake ninja-build g++ pkg-config libboost-dev libssl-dev ccache
  # tests: GoogleTest, libFuzzer (clang + its runtime), lint
  libgtest-dev clang-14 libclang-rt-14-dev clang-tidy clang-format
  # transport and launcher tests: a real sshd on loopback, iperf3 as the benchmark baseline
  openssh-server openssh-client iperf3 procps
  # THREELC_TRANSPORT=ucx: UCX (headers, libraries, its CMake config) and ucx_perftest, the
  # UCX benchmark's baseline
  libucx-dev ucx-utils
  # the DDP example measures every socket's bytes with ss; tools/eval/emulate_cluster (ip netns,
  # tc) and tools/eval/evaluate's baselines (Open MPI through mpi4py) and plots (matplotlib)
  iproute2 openmpi-bin python3-mpi4py python3-matplotlib
  # Python side: Debian's /usr/bin/python3 with numpy, torch and pytest; venv, for the virtual
  # environments `pip install .` goes into (README.md, "Install with pip")
  python3 python3-numpy python3-torch python3-pytest python3-venv
  # real data for the demo and the benchmarks
  dataset-fashion-mnist
)

missing=()
for package in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$package" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$package")
done

if ((${#missing[@]} == 0)); then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi

echo "setup: installing ${missing[*]}"
sudo=()
if ((EUID != 0)); then
  command -v sudo >/dev/null || { echo "setup: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
