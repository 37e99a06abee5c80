#!/usr/bin/env bash
# The GPU check: the CUDA codec's tests and kernel benchmark, and CUDA tensors through
# the engine (threelc.torch, 2 ranks on the GPU), on a machine with a GPU, sized to finish within
# 5 minutes on one H200.
#
#   tools/gpu_check.sh build   # where nvcc and our Debian packages are: CMake into build-gpu/
#                              # (CUDA on; static CUDA runtime, GoogleTest, libstdc++ and
#                              # libcrypto; no UCX), then the binaries and libthreelc.so staged
#                              # in build-gpu/carry/
#   tools/gpu_check.sh run     # where the GPU is: runs build-gpu/carry/*, writes OUT/ (default
#                              # $OUT, else build-gpu/out): gpu_check.md (the summary), *.log
#   tools/gpu_check.sh         # both, on a machine that has nvcc and a GPU
#
# The run needs the NVIDIA driver, and for the engine check python3 with torch (CUDA) and numpy:
# the binaries carry everything else. Through the device
# tool: `tools/gpu_check.sh build` here, then run `tools/gpu_check.sh run` there with carry
# ["build-gpu/carry"]. Exit status: 0 when every test passed and both kernel targets were met,
# 1 otherwise, 77 when there is no GPU.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build-gpu
carry=$build/carry
targets=(cuda_codec_tests compression_tests threelc-cuda-bench threelc)

do_build() {
  set -e
  mkdir -p "$build"
  local generator=()
  command -v ninja >/dev/null && [[ ! -f $build/Makefile ]] && generator=(-G Ninja)
  cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DTHREELC_PORTABLE_GPU_BINARIES=ON -DTHREELC_FUZZ=OFF | tee "$build/configure.log"
  grep -q 'threelc: CUDA codec: ON' "$build/configure.log" ||
    { echo "gpu_check: CMake found no nvcc (PATH, CUDACXX, /usr/local/cuda/bin): cannot build" >&2; exit 1; }
  cmake --build "$build" --parallel "$(nproc)" --target "${targets[@]}"
  rm -rf "$carry" && mkdir -p "$carry"
  cp "$build/tests/cuda_codec_tests" "$build/tests/compression_tests" \
    "$build/bin/threelc-cuda-bench" "$build/lib/libthreelc.so" "$carry/"
  echo "gpu_check: staged in $carry:"
  ls -l "$carry"
  set +e
}

# run_step <name> <timeout s> <command...>: runs it into OUT/<name>.log; its status in $?.
run_step() {
  local name=$1 limit=$2
  shift 2
  echo "gpu_check: $name: $*"
  timeout "$limit" "$@" >"$out/$name.log" 2>&1
  local rc=$?
  ((rc == 124)) && echo "gpu_check: $name: timed out after ${limit}s" | tee -a "$out/$name.log"
  return $rc
}

# The gtest summary of a log: "N passed, M failed, K skipped".
gtest_counts() {
  local passed failed skipped
  passed=$(grep -c '^\[       OK \]' "$1")
  failed=$(grep -c '^\[  FAILED  \] [A-Za-z].*\.' "$1")
  skipped=$(grep -c '^\[  SKIPPED \] [A-Za-z].*(' "$1")
  echo "$passed passed, $((failed / 2)) failed, $skipped skipped"
}

do_run() {
  out=${OUT:-$build/out}
  mkdir -p "$out"
  local summary=$out/gpu_check.md status=0
  {
    echo "# GPU check, $(date -u +%Y-%m-%dT%H:%MZ)"
    echo
    echo "commit $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)," \
      "$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -1)"
    echo
  } >"$summary"
  if ! nvidia-smi -L >/dev/null 2>&1; then
    echo "no GPU: nvidia-smi -L fails" | tee -a "$summary"
    return 77
  fi
  for binary in cuda_codec_tests compression_tests threelc-cuda-bench libthreelc.so; do
    [[ -x $carry/$binary ]] || { echo "gpu_check: $carry/$binary is missing: run build first" >&2; return 1; }
  done

  run_step cuda_codec_tests 180 "$carry/cuda_codec_tests" || status=1
  echo "- cuda_codec_tests (GPU against CPU): $(gtest_counts "$out/cuda_codec_tests.log")" >>"$summary"
  grep '^\[  FAILED  \]\|Failure' "$out/cuda_codec_tests.log" | head -20 | sed 's/^/    /' >>"$summary"
  if ! grep -q '^\[       OK \]' "$out/cuda_codec_tests.log"; then
    echo "    no GPU test ran (skipped: $(grep -m1 'no CUDA' "$out/cuda_codec_tests.log"))" >>"$summary"
    status=1
  fi
  run_step compression_tests 120 "$carry/compression_tests" || status=1
  echo "- compression_tests (CPU codec on this CPU): $(gtest_counts "$out/compression_tests.log")" \
    >>"$summary"

  # CUDA tensors through the engine: 2 ranks on GPU 0 (NCCL refuses two ranks on one GPU, so
  # uncompressed allreduces are staged: THREELC_NCCL=0), each result against the host path's.
  local python=${PYTHON:-python3}
  if "$python" -c 'import torch, numpy; assert torch.cuda.is_available()' 2>/dev/null; then
    PYTHONPATH=$root/frameworks/python THREELC_LIBRARY=$carry/libthreelc.so \
      THREELC_FUSION_THRESHOLD=0 THREELC_NCCL=0 PYTHONUNBUFFERED=1 \
      run_step torch_cuda_job 150 "$python" "$root/tools/threelcrun" -np 2 \
      "$python" "$root/tests/compression/gpu/torch_cuda_job.py" || status=1
    echo "- engine, CUDA tensors via threelc.torch (2 ranks, 3LC and staged, against the host" \
      "path): $(grep -c '"failures": \[\]' "$out/torch_cuda_job.log") of 2 ranks without a" \
      "difference" >>"$summary"
    grep '"rank"' "$out/torch_cuda_job.log" | head -2 | sed 's/^/    /' >>"$summary"
    tail -n 5 "$out/torch_cuda_job.log" | grep -v '"rank"' | sed 's/^/    /' >>"$summary"
  else
    echo "- engine, CUDA tensors: not run ($python has no torch with CUDA)" >>"$summary"
    status=1
  fi

  run_step cuda_bench 120 "$carry/threelc-cuda-bench" --mib 4,256 --reps 20 || status=1
  {
    echo
    echo "Kernel benchmark (\`threelc-cuda-bench --mib 4,256 --reps 20\`, medians):"
    echo
    grep -v '^json:' "$out/cuda_bench.log" | sed 's/^/    /'
  } >>"$summary"
  # Targets at 256 MiB: encode >= 0.6 TB/s of fp32 input, decode_add >= 1.5 TB/s.
  local line encode decode
  line=$(grep '^json: {"mib": 256,' "$out/cuda_bench.log")
  encode=$(sed -n 's/.*"encode_tbps": \([0-9.]*\).*/\1/p' <<<"$line")
  decode=$(sed -n 's/.*"decode_add_tbps": \([0-9.]*\).*/\1/p' <<<"$line")
  if [[ -n $encode && -n $decode ]]; then
    local verdict
    verdict=$(awk -v e="$encode" -v d="$decode" 'BEGIN {
      printf "encode %.3f TB/s (target 0.6: %s), decode_add %.3f TB/s (target 1.5: %s)",
        e, e >= 0.6 ? "met" : "NOT met", d, d >= 1.5 ? "met" : "NOT met";
      exit !(e >= 0.6 && d >= 1.5) }') || status=1
    printf '\nTargets at 256 MiB: %s\n' "$verdict" >>"$summary"
  else
    echo "no 256 MiB result in cuda_bench.log" >>"$summary"
    status=1
  fi
  echo "gpu_check: summary in $summary (exit $status)"
  cat "$summary"
  return $status
}

case "${1:-all}" in
  build) do_build ;;
  run) do_run ;;
  all) do_build && do_run ;;
  *)
    echo "usage: tools/gpu_check.sh [build|run]" >&2
    exit 2
    ;;
esac
