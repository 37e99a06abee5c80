// Watches this rank's 3LC error feedback per tensor for the two ways compressed training goes
// wrong, so that the engine says so (naming the tensor) instead of training silently into NaN:
//
// - runaway: every 8th compressed step of a tensor (a sampled step: the 1st, 9th, 17th, ...)
//   the collective measures G = max |values this rank encoded with error feedback| (its
//   gradient where it pushes, the sum it reduced where it owns the segment) and E = max
//   |residual| after the update. With Gref the largest G of the last 8 sampled steps, E > limit *
//   Gref (THREELC_FEEDBACK_LIMIT) means the residual has lost touch with the gradients it
//   should be a fraction of (|e| <= s/2 * max |x + e| per block, so E stays within
//   s / (2 - s) * G while gradients keep their scale). Reported once per tensor, then again
//   only when the ratio has doubled since the last report.
// - non-finite: a block of a compressed tensor came back raw because its values were NaN or
//   Inf (or so large that the scale overflows): it was sent uncompressed and its residual
//   left as it was (docs/DESIGN.md, "The block and its raw fallback"). Reported at the 1st,
//   10th, 100th, ... occurrence.
//
// Every occurrence becomes a FeedbackAlert (for the statistics); rate-limited ones carry no
// message. Deterministic and passive: no clock, no I/O, no threads; numerics are untouched.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "threelc/compression/codec.h"

namespace threelc::engine {

// What a compressed allreduce measured of one tensor on this rank during one call.
struct FeedbackSample {
  bool measure = false;     // in: measure input_max and residual_max (a sampled step)
  double limit = 0.0;       // in: the runaway limit (0: measure every block's residual)
  bool compressed = false;  // out: some block of the tensor was encoded with error feedback
  bool non_finite = false;  // out: some block came back raw (values not finite)
  float input_max = 0.0f;   // out, when measured: max |values encoded| (NaN if one was NaN)
  // out, when measured: max |residual| after the update, over the blocks where it can
  // exceed limit * that block's input max. A block's residuals are at most half its scale, so
  // a block whose scale / 2 <= limit * its input max cannot decide the check (Gref is at least
  // that input max) and its residual pass is skipped: in healthy training every block's is.
  float residual_max = 0.0f;
};

// The collectives' side, around every encoding of a block of a tensor with error feedback
// (`sample` may be null: nothing happens). measure_input returns the block's max |value| when
// measuring (0 otherwise), to be passed to measure_encoded after the encoding.
float measure_input(FeedbackSample* sample, const compression::Values& values);
void measure_encoded(FeedbackSample* sample, const compression::EncodedBlock& block,
                     float input_max, const float* residual, size_t count);

// The sample of tensor `index` in a collective's `samples` (empty: none kept), or null where
// the collective does not compress.
inline FeedbackSample* sample_of(std::span<FeedbackSample> samples, bool compress, size_t index) {
  return compress && !samples.empty() ? &samples[index] : nullptr;
}
// Throws std::invalid_argument (naming `collective`) unless `samples` is empty or holds one
// entry per tensor.
void check_samples(std::span<const FeedbackSample> samples, size_t tensors, const char* collective);

enum class FeedbackAlertKind : uint8_t { kRunaway, kNonFinite };

struct FeedbackAlert {
  FeedbackAlertKind kind = FeedbackAlertKind::kRunaway;
  std::string tensor;
  std::string message;  // empty: counted, not reported (rate limit)
};

class FeedbackMonitor {
 public:
  static constexpr uint64_t kCheckEvery = 8;  // a sampled step every this many steps
  static constexpr size_t kHistory = 8;       // sampled steps in Gref

  // `limit`: THREELC_FEEDBACK_LIMIT (0 disables the runaway check); `rank` names this rank.
  FeedbackMonitor(double limit, int rank);

  // The sample to hand the next compressed step of `name`: measuring when that step is a
  // sampled one (never while the check is disabled).
  FeedbackSample next_sample(const std::string& name) const;
  // The outcome of a step of `name` compressed with `sparsity`; appends the alerts it raises to
  // `alerts`. A sample that was not compressed (one rank, no elements) counts for nothing.
  void step_done(const std::string& name, float sparsity, const FeedbackSample& sample,
                 std::vector<FeedbackAlert>& alerts);

  // Compressed steps of `name` seen so far.
  uint64_t steps(const std::string& name) const;

 private:
  struct Tensor {
    uint64_t steps = 0;
    uint64_t non_finite = 0;
    std::array<float, kHistory> gradient_max{};  // the last sampled steps' G, a ring
    size_t checks = 0;                           // sampled steps with a finite G
    double reported_ratio = 0.0;                 // E / Gref of the last report; 0: none yet
  };

  void check_runaway(const std::string& name, Tensor& t, float sparsity,
                     const FeedbackSample& sample, std::vector<FeedbackAlert>& alerts) const;

  double limit_;
  int rank_;
  std::unordered_map<std::string, Tensor> tensors_;
};

}  // namespace threelc::engine
