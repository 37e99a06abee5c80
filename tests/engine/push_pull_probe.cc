// push_pull_probe: joins a job through options_from_environment() and runs push_pull_sum on
// several fused layouts, uncompressed and compressed, for several iterations. For every run it
// prints "HASH <case> <iteration> <fnv1a-64 of the output>" (push_pull_test checks that every
// rank prints the same lines) and checks on its own:
// - uncompressed: the output equals the exact sum (the data are small integers, exact in fp32);
// - compressed, first iteration: |out - exact| <= 4(N-1) + 4N (see first_bound());
// - compressed, every iteration: |sum of outputs - sum of exact sums| <= 24(N-1) + 8, a bound
//   that does not grow with iterations (see drift_bound()).
// Exit status: 0 all verified, 1 transport Error, 2 mismatch, 3 any other exception.
//
// THREELC_PROBE_MODE=malformed (test only, 2 ranks): rank 1 sends rank 0 a garbage push block;
// rank 0 must get a CollectiveError naming rank 1 (printed as "ERROR <peer> <message>").
//
// THREELC_PROBE_MODE=foreign: push_pull_sum on values and residuals behind addresses the CPU
// cannot dereference (non-canonical x86-64 pointers), reached only through a BlockCodec, as
// device memory is with the CUDA codec; every iteration must equal, bit for bit, the host path
// on the same input (exit 2 otherwise; a direct access would crash the probe).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "collectives/block_codec.h"
#include "collectives/push_pull.h"
#include "error_feedback.h"
#include "probe_support.h"
#include "threelc/transport/transport.h"

namespace te = threelc::engine;
namespace tt = threelc::transport;
namespace ts = threelc::test_support;

namespace {

// Every value is an integer in [-8, 8]: X = 8.
constexpr double kMaxValue = 8.0;

float value(int rank, size_t tensor, size_t i, int iteration) {
  const size_t k = static_cast<size_t>(rank) * 7919 + tensor * 104729 + i * 31 + (i >> 7) +
                   static_cast<size_t>(iteration) * 17;
  return static_cast<float>(static_cast<int>(k % 17) - 8);
}

// With s = 1 and no prior error, a rank's push residual at any element is at most half the
// block's scale, and the scale is max |x| <= X: 4 per pushing rank. The owner's pre-pull sum
// is its own value plus N-1 decoded values of magnitude <= scale <= X, so |y| <= N X and the
// pull residual is at most N X / 2.
double first_bound(int n) { return (n - 1) * kMaxValue / 2 + n * kMaxValue / 2; }

// Over iterations with error feedback, d + e_new == x + e_old holds exactly for every
// encoding, so (sum of outputs) - (sum of exact sums) = -(sum of every rank's current error at
// that element), up to fp32 rounding of the owner's adds. A residual is at most half its
// block's scale, s * max|x + e|, so E <= (X + E) / 2, i.e. a push residual stays <= X. A
// decoded push value is <= X + E = 2X, so the owner's sum is <= X + 2X(N-1) =: Y and its pull
// residual stays <= Y. Total: X(N-1) + X + 2X(N-1) = 24(N-1) + 8, whatever the iteration.
double drift_bound(int n) { return 3 * kMaxValue * (n - 1) + kMaxValue; }

struct Case {
  std::string name;
  std::vector<size_t> sizes;
  int iterations;
  size_t chunk_bytes;
};

int run_case(tt::Context& ctx, te::ErrorFeedbackStore& store, const Case& c, bool compress) {
  const int rank = ctx.rank();
  const int n = ctx.size();
  const std::string tag = c.name + (compress ? "/3lc" : "/raw");
  std::vector<te::TensorSlice> tensors;
  size_t total = 0;
  for (size_t t = 0; t < c.sizes.size(); ++t) {
    tensors.push_back({tag + "/t" + std::to_string(t), total, c.sizes[t]});
    total += c.sizes[t];
  }
  std::vector<float> fused(total);
  std::vector<double> exact(total), cum_out(total, 0.0), cum_exact(total, 0.0);
  te::CompressedAllreduceOptions options;
  options.compress = compress;
  options.chunk_bytes = c.chunk_bytes;
  double worst_first = 0.0, worst_drift = 0.0;
  for (int it = 0; it < c.iterations; ++it) {
    for (const auto& t : tensors) {
      const size_t ti = static_cast<size_t>(&t - tensors.data());
      for (size_t i = 0; i < t.count; ++i) {
        fused[t.offset + i] = value(rank, ti, i, it);
        double sum = 0.0;
        for (int r = 0; r < n; ++r) sum += value(r, ti, i, it);
        exact[t.offset + i] = sum;
      }
    }
    te::push_pull_sum(ctx, fused, tensors, store, options);
    std::printf(
        "HASH %s %d %016llx\n", tag.c_str(), it,
        static_cast<unsigned long long>(ts::fnv1a(std::as_bytes(std::span<const float>(fused)))));
    for (size_t i = 0; i < total; ++i) {
      const double out = fused[i];
      if (!compress || n == 1) {
        if (out != exact[i]) {
          std::fprintf(stderr, "rank %d %s it %d: element %zu is %g, exact sum %g\n", rank,
                       tag.c_str(), it, i, out, exact[i]);
          return 2;
        }
        continue;
      }
      cum_out[i] += out;
      cum_exact[i] += exact[i];
      const double drift = std::fabs(cum_out[i] - cum_exact[i]);
      worst_drift = std::max(worst_drift, drift);
      if (it == 0) worst_first = std::max(worst_first, std::fabs(out - exact[i]));
      if ((it == 0 && std::fabs(out - exact[i]) > first_bound(n)) ||
          drift > drift_bound(n) + 1e-3) {
        std::fprintf(stderr, "rank %d %s it %d: element %zu is %g, exact sum %g, drift %g\n", rank,
                     tag.c_str(), it, i, out, exact[i], drift);
        return 2;
      }
    }
  }
  if (compress) {
    std::printf("STAT %s first_error %g (bound %g) max_drift %g (bound %g)\n", tag.c_str(),
                worst_first, first_bound(n), worst_drift, drift_bound(n));
  }
  return 0;
}

// A codec whose values live behind kBase + byte offset into `arena`: push_pull can only reach
// them through it.
class ForeignMemoryCodec final : public te::BlockCodec {
 public:
  static constexpr uintptr_t kBase = uintptr_t{0x8000} << 48;  // non-canonical: any access faults

  explicit ForeignMemoryCodec(size_t floats) : arena_(floats, 0.0f) {}
  float* foreign(size_t offset) const {
    // NOLINTNEXTLINE(performance-no-int-to-ptr): an address no code may dereference, on purpose
    return reinterpret_cast<float*>(kBase + 4 * offset);
  }
  float* real(const float* p) {
    return arena_.data() + (reinterpret_cast<uintptr_t>(p) - kBase) / 4;
  }

  bool host_values() const override { return false; }
  threelc::compression::Status encode(const float* values, size_t count, float* error,
                                      const threelc::compression::EncodeOptions* quantize,
                                      std::span<uint8_t> out,
                                      threelc::compression::EncodedBlock* result) override {
    return host_.encode(real(values), count, error ? real(error) : nullptr, quantize, out, result);
  }
  threelc::compression::Status decode(std::span<const uint8_t> block, size_t count, bool add,
                                      float* dst) override {
    return host_.decode(block, count, add, real(dst));
  }
  void copy(float* dst, const float* src, size_t count) override {
    host_.copy(real(dst), real(src), count);
  }

 private:
  te::HostBlockCodec host_;
  std::vector<float> arena_;
};

int foreign(tt::Context& ctx) {
  const std::vector<size_t> sizes = {5, 0, 20481, 7919, 100000};
  std::vector<te::TensorSlice> tensors;
  size_t total = 0;
  for (size_t t = 0; t < sizes.size(); ++t) {
    tensors.push_back({"foreign/t" + std::to_string(t), total, sizes[t]});
    total += sizes[t];
  }
  // Arena: the fused values, then one residual per tensor.
  ForeignMemoryCodec codec(2 * total);
  std::vector<float*> residuals;
  residuals.reserve(tensors.size());
  for (const auto& t : tensors) residuals.push_back(codec.foreign(total + t.offset));
  te::ErrorFeedbackStore store;
  std::vector<float> host(total);
  te::CompressedAllreduceOptions options;
  options.chunk_bytes = 8192;
  for (int it = 0; it < 5; ++it) {
    float* values = codec.real(codec.foreign(0));
    for (size_t i = 0; i < total; ++i) {
      host[i] = values[i] = value(ctx.rank(), i % 7, i, it) * 0.37f;
    }
    te::push_pull_sum(ctx, host, tensors, store, options);
    te::CompressedAllreduceOptions via_codec = options;
    via_codec.codec = &codec;
    const std::span<float> fused(codec.foreign(0), total);
    te::push_pull_sum(ctx, fused, fused, tensors, residuals, via_codec);
    for (size_t i = 0; i < total; ++i) {
      uint32_t a, b;
      std::memcpy(&a, &values[i], 4);
      std::memcpy(&b, &host[i], 4);
      if (a != b) {
        std::fprintf(stderr,
                     "rank %d iteration %d: element %zu is %g through the codec, %g on "
                     "the host\n",
                     ctx.rank(), it, i, values[i], host[i]);
        return 2;
      }
    }
  }
  std::printf(
      "HASH foreign %016llx\n",
      static_cast<unsigned long long>(ts::fnv1a(std::as_bytes(std::span<const float>(host)))));
  return 0;
}

int malformed(tt::Context& ctx) {
  std::vector<float> fused(1000, 1.0f);
  const std::vector<te::TensorSlice> tensors = {{"w", 0, fused.size()}};
  const te::CompressedAllreduceOptions options;
  return ts::expect_error_from_rank1(ctx, options.tag_base, 64, "push_pull_probe", [&] {
    te::ErrorFeedbackStore store;
    te::push_pull_sum(ctx, fused, tensors, store, options);
  });
}

}  // namespace

int main() {
  return ts::probe_main("push_pull_probe", [] {
    auto ctx = tt::connect(tt::options_from_environment());
    const char* mode = std::getenv("THREELC_PROBE_MODE");
    if (mode != nullptr && std::strcmp(mode, "malformed") == 0) return malformed(*ctx);
    if (mode != nullptr && std::strcmp(mode, "foreign") == 0) return foreign(*ctx);
    te::ErrorFeedbackStore store;
    const std::vector<size_t> fused = {5, 0, 20481, 1, 7919, 4, 6, 100000};
    const std::vector<Case> cases = {
        {"small", {0, 1, 4, 5, 6}, 20, size_t{1} << 20},
        {"odd", {20481}, 20, size_t{1} << 20},
        {"prime", {7919}, 20, size_t{1} << 20},
        {"fused", fused, 20, size_t{1} << 20},
        {"fused_4k_chunks", fused, 20, 4096},
        {"big", {3000001}, 3, size_t{1} << 20},
    };
    for (const auto& c : cases) {
      for (const bool compress : {false, true}) {
        if (const int rc = run_case(*ctx, store, c, compress); rc != 0) return rc;
      }
    }
    return 0;
  });
}
