#!/usr/bin/env bash
# The full soak: 4 ranks, 20,000 push_pull / allreduce calls of random sizes, dtypes, ops and
# names (tests/engine/soak/soak_worker.py), every result checked, results bitwise identical
# across ranks, resident memory grown under 5 % after warm-up, no error.
# ctest runs the same test with 5000 calls (soak_tests); this is the long one (~70-90 s over tcp,
# ~140 s over UCX on a busy 2-core machine).
#
#   tools/dev/soak.sh                      # tcp, 20000 calls, 4 ranks
#   tools/dev/soak.sh --transport ucx      # over UCX (a build with UCX)
#   CALLS=50000 NP=3 tools/dev/soak.sh     # other sizes; THREELC_SOAK_* of soak_worker.py pass
#
# Prints per rank VmRSS after warm-up and at the end, the growth, the results' hash, and the
# memory each fresh name costs (STAT fresh_*). Exit status: pytest's (0 = passed).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
transport=tcp
while [[ $# -gt 0 ]]; do
  case "$1" in
    --transport) transport=$2; shift 2 ;;
    --transport=*) transport=${1#*=}; shift ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "soak.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
export THREELC_SOAK_CALLS=${CALLS:-20000}
export THREELC_SOAK_NP=${NP:-4}
export THREELC_SOAK_CACHE_CAPACITY=${THREELC_SOAK_CACHE_CAPACITY:-1024}  # the engine's default
if [[ $transport == tcp ]]; then
  unset THREELC_TRANSPORT
else
  export THREELC_TRANSPORT=$transport
fi
export THREELC_LIBRARY=${THREELC_LIBRARY:-$root/build/lib/libthreelc.so}
export PYTHONPATH=$root/frameworks/python${PYTHONPATH:+:$PYTHONPATH}
export PYTHONDONTWRITEBYTECODE=1
start=$(date +%s)
status=0
/usr/bin/python3 -m pytest -q -s -p no:cacheprovider "$root/tests/engine/soak" || status=$?
echo "soak.sh: $THREELC_SOAK_NP ranks, $THREELC_SOAK_CALLS calls over $transport:" \
     "$(( $(date +%s) - start )) s wall, exit $status"
exit $status
