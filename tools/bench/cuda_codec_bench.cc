// threelc-cuda-bench: throughput of the CUDA 3LC kernels against a device-to-device copy
// measured in the same run (see docs/BENCHMARKS.md). For each block size: cudaMemcpy D2D of the
// fp32 input (rate = bytes read + written), encode_on_device of fp32 input with error feedback
// (rate = fp32 input bytes; the two passes move about 20 bytes per element), and
// decode_add_on_device of the resulting block (rate = 8 bytes per element: dst read and
// written). Repetitions are interleaved (copy, encode, decode_add, copy, ...) and medians taken.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "threelc/compression/block_format.h"
#include "threelc/compression/codec.h"
#include "threelc/compression/cuda_codec.h"

namespace {

namespace tc = threelc::compression;

constexpr const char* kHelp = R"(usage: threelc-cuda-bench [--mib 4,256] [--reps N] [--sparsity S]

Times the CUDA 3LC kernels on the current device against cudaMemcpy device-to-device of the
same fp32 buffer, repetitions interleaved, medians reported:
  copy        bytes read + written per second (2 x 4 bytes per element)
  encode      fp32 input bytes per second (encode_on_device with error feedback; each call
              includes the wait for the block's header)
  decode_add  8 bytes per element per second (dst read and written; all-zero groups skip
              their writes)
Input: normal(0, 1) values with error feedback from a previous encode of other values, like a
gradient in training. Prints one line per size and a JSON line per size (prefix "json: ").
Exit status 0 on success, 1 when a CUDA call fails, 77 when there is no CUDA device.
)";

struct Options {
  std::vector<size_t> mib = {4, 256};
  int reps = 20;
  float sparsity = 1.0f;
};

bool parse(int argc, char** argv, Options* opt) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    const char* value = i + 1 < argc ? argv[i + 1] : nullptr;
    if (arg == "--help" || arg == "-h") {
      std::fputs(kHelp, stdout);
      std::exit(0);
    } else if (arg == "--mib" && value != nullptr) {
      opt->mib.clear();
      for (const char* p = value; *p != '\0';) {
        char* end = nullptr;
        opt->mib.push_back(std::strtoull(p, &end, 10));
        if (end == p) return false;
        p = *end == ',' ? end + 1 : end;
      }
      ++i;
    } else if (arg == "--reps" && value != nullptr) {
      opt->reps = std::atoi(value);
      ++i;
    } else if (arg == "--sparsity" && value != nullptr) {
      opt->sparsity = std::strtof(value, nullptr);
      ++i;
    } else {
      std::fprintf(stderr, "threelc-cuda-bench: unknown or incomplete option %s\n", argv[i]);
      return false;
    }
  }
  return opt->reps > 0 && !opt->mib.empty();
}

#define BENCH_CUDA(call)                                                                   \
  do {                                                                                     \
    if (const cudaError_t e_ = (call); e_ != cudaSuccess) {                                \
      std::fprintf(stderr, "threelc-cuda-bench: %s: %s\n", #call, cudaGetErrorString(e_)); \
      return 1;                                                                            \
    }                                                                                      \
  } while (0)

#define BENCH_OK(call)                                                                   \
  do {                                                                                   \
    if (const tc::Status s_ = (call); !s_.ok()) {                                        \
      std::fprintf(stderr, "threelc-cuda-bench: %s: %s\n", #call, s_.message().c_str()); \
      return 1;                                                                          \
    }                                                                                    \
  } while (0)

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int bench_size(size_t mib, const Options& opt, cudaStream_t stream) {
  const size_t n = mib * (size_t{1} << 20) / 4;
  std::vector<float> host(n);
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  for (float& v : host) v = normal(rng);

  float* x = nullptr;
  float* copy = nullptr;
  float* error = nullptr;
  float* dst = nullptr;
  uint8_t* block = nullptr;
  const size_t block_capacity = tc::max_block_bytes(n);
  BENCH_CUDA(cudaMalloc(&x, n * 4));
  BENCH_CUDA(cudaMalloc(&copy, n * 4));
  BENCH_CUDA(cudaMalloc(&error, n * 4));
  BENCH_CUDA(cudaMalloc(&dst, n * 4));
  BENCH_CUDA(cudaMalloc(&block, block_capacity));
  BENCH_CUDA(cudaMemcpy(x, host.data(), n * 4, cudaMemcpyHostToDevice));
  BENCH_CUDA(cudaMemset(dst, 0, n * 4));

  tc::cuda::Workspace workspace(n);
  const tc::cuda::DeviceValues values{x, tc::DType::kFloat32, n};
  const tc::EncodeOptions options{opt.sparsity, tc::Isa::kAuto};
  tc::EncodedBlock encoded;
  // A previous step's error: encode other values once from zero error.
  BENCH_CUDA(cudaMemset(error, 0, n * 4));
  BENCH_CUDA(cudaMemcpy(copy, host.data() + n / 2, (n - n / 2) * 4, cudaMemcpyHostToDevice));
  BENCH_OK(tc::cuda::encode_on_device(tc::cuda::DeviceValues{copy, tc::DType::kFloat32, n - n / 2},
                                      error, options, workspace, stream, block, block_capacity,
                                      &encoded));
  BENCH_OK(tc::cuda::encode_on_device(values, error, options, workspace, stream, block,
                                      block_capacity, &encoded));
  std::vector<uint8_t> header(tc::kHeaderBytes);
  BENCH_CUDA(cudaMemcpy(header.data(), block, tc::kHeaderBytes, cudaMemcpyDeviceToHost));
  // The decoders take a validated block: validate a host copy once.
  std::vector<uint8_t> host_block(encoded.bytes);
  BENCH_CUDA(cudaMemcpy(host_block.data(), block, encoded.bytes, cudaMemcpyDeviceToHost));
  tc::BlockInfo info;
  BENCH_OK(tc::validate(host_block, n, &info));

  cudaEvent_t start = nullptr;
  cudaEvent_t stop = nullptr;
  BENCH_CUDA(cudaEventCreate(&start));
  BENCH_CUDA(cudaEventCreate(&stop));
  std::vector<double> copy_s;
  std::vector<double> encode_s;
  std::vector<double> decode_s;
  auto timed = [&](std::vector<double>* into, auto&& body) -> int {
    BENCH_CUDA(cudaEventRecord(start, stream));
    if (body() != 0) return 1;
    BENCH_CUDA(cudaEventRecord(stop, stream));
    BENCH_CUDA(cudaEventSynchronize(stop));
    float ms = 0;
    BENCH_CUDA(cudaEventElapsedTime(&ms, start, stop));
    into->push_back(ms / 1e3);
    return 0;
  };
  for (int rep = -2; rep < opt.reps; ++rep) {  // two untimed warm-up rounds
    std::vector<double> discard;
    const bool keep = rep >= 0;
    if (timed(keep ? &copy_s : &discard, [&] {
          return cudaMemcpyAsync(copy, x, n * 4, cudaMemcpyDeviceToDevice, stream) == cudaSuccess
                     ? 0
                     : 1;
        }) != 0) {
      return 1;
    }
    // The encode keeps feeding back its error, as in training; the block stays about as large.
    tc::EncodedBlock again;
    if (timed(keep ? &encode_s : &discard, [&] {
          return tc::cuda::encode_on_device(values, error, options, workspace, stream, block,
                                            block_capacity, &again)
                         .ok()
                     ? 0
                     : 1;
        }) != 0) {
      return 1;
    }
    // Re-put the validated block (the encode just overwrote it with a similar one).
    BENCH_CUDA(cudaMemcpyAsync(block, host_block.data(), host_block.size(), cudaMemcpyHostToDevice,
                               stream));
    if (timed(keep ? &decode_s : &discard, [&] {
          return tc::cuda::decode_add_on_device(block, info, 0.25f, dst, workspace, stream).ok()
                     ? 0
                     : 1;
        }) != 0) {
      return 1;
    }
  }
  const auto elements = static_cast<double>(n);
  const double copy_tbps = 8.0 * elements / median(copy_s) / 1e12;
  const double encode_tbps = 4.0 * elements / median(encode_s) / 1e12;
  const double decode_tbps = 8.0 * elements / median(decode_s) / 1e12;
  const double bits_per_value = 8.0 * static_cast<double>(encoded.bytes) / elements;
  std::printf(
      "%4zu MiB: copy %.3f TB/s (%.1f us) | encode %.3f TB/s of fp32 input (%.1f us, %.2fx the "
      "copy's time) | decode_add %.3f TB/s at 8 B/element (%.1f us) | %.3f bits/value\n",
      mib, copy_tbps, median(copy_s) * 1e6, encode_tbps, median(encode_s) * 1e6,
      median(encode_s) / median(copy_s), decode_tbps, median(decode_s) * 1e6, bits_per_value);
  std::printf(
      "json: {\"mib\": %zu, \"reps\": %d, \"sparsity\": %.2f, \"copy_tbps\": %.4f, "
      "\"encode_tbps\": %.4f, \"decode_add_tbps\": %.4f, \"copy_us\": %.2f, \"encode_us\": %.2f, "
      "\"decode_add_us\": %.2f, \"bits_per_value\": %.4f}\n",
      mib, opt.reps, opt.sparsity, copy_tbps, encode_tbps, decode_tbps, median(copy_s) * 1e6,
      median(encode_s) * 1e6, median(decode_s) * 1e6, bits_per_value);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaFree(x);
  cudaFree(copy);
  cudaFree(error);
  cudaFree(dst);
  cudaFree(block);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  if (!parse(argc, argv, &opt)) {
    std::fputs(kHelp, stderr);
    return 2;
  }
  std::string why;
  if (tc::cuda::device_count(&why) == 0) {
    std::fprintf(stderr, "threelc-cuda-bench: %s\n", why.c_str());
    return 77;
  }
  cudaDeviceProp prop{};
  BENCH_CUDA(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s, %d SMs, %.0f MiB L2\n", prop.name, prop.multiProcessorCount,
              prop.l2CacheSize / 1048576.0);
  cudaStream_t stream = nullptr;
  BENCH_CUDA(cudaStreamCreate(&stream));
  for (size_t mib : opt.mib) {
    if (bench_size(mib, opt, stream) != 0) return 1;
  }
  cudaStreamDestroy(stream);
  return 0;
}
