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
  # tests/launchers: a throwaway single-node Slurm cluster (the daemons are not started or
  # configured here: the tests start their own with a slurm.conf of their own) and Slurm's
  # PMI-2 library; libpmix-dev at run time too, since Slurm's mpi/pmix plugin dlopens the
  # unversioned libpmix.so that only it ships
  slurmd slurmctld slurm-client munge libpmix-dev "libpmi2-0|libpmi2-0t64"
  # Python side: Debian's /usr/bin/python3 with numpy, torch and pytest; venv, for the virtual
  # environments `pip install .` goes into (README.md, "Install with pip")
  python3 python3-numpy python3-torch python3-pytest python3-venv
  # real data for the demo and the benchmarks: Fashion-MNIST, and the Python documentation's
  # reST sources (/usr/share/doc/python3/html/_sources), the transformer example's text
  dataset-fashion-mnist python3-doc
)

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
names=()
for entry in "${missing[@]}"; do
  chosen=""
  for name in ${entry//|/ }; do
    if [[ -z "$chosen" ]] && apt-cache show "$name" >/dev/null 2>&1; then chosen=$name; fi
  done
  [[ -n "$chosen" ]] || { echo "setup: no package named ${entry//|/ or } in apt's lists" >&2; exit 1; }
  names+=("$chosen")
done
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${names[@]}"
