#include "collectives/feedback_monitor.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>

namespace threelc::engine {
namespace {

namespace cc = threelc::compression;

// max(a, b) where a NaN on either side wins (std::max would drop one on the right).
float nan_max(float a, float b) { return std::isnan(b) || b > a ? b : a; }

// 1, 10, 100, ...
bool power_of_ten(uint64_t n) {
  while (n >= 10 && n % 10 == 0) n /= 10;
  return n == 1;
}

std::string format(const char* spec, double value) {
  char text[48];
  std::snprintf(text, sizeof text, spec, value);
  return text;
}

// 1.0, 1.9, 1.25: as the user wrote it, with a decimal point.
std::string sparsity_text(float sparsity) {
  std::string text = format("%g", sparsity);
  if (text.find_first_of(".e") == std::string::npos) text += ".0";
  return text;
}

// "5200x", "3.7e+09x"
std::string ratio_text(double ratio) {
  return (ratio < 1e6 ? format("%.0f", ratio) : format("%.2g", ratio)) + "x";
}

}  // namespace

void check_samples(std::span<const FeedbackSample> samples, size_t tensors,
                   const char* collective) {
  if (!samples.empty() && samples.size() != tensors) {
    throw std::invalid_argument(std::string(collective) + ": " + std::to_string(samples.size()) +
                                " feedback samples for " + std::to_string(tensors) + " tensors");
  }
}

float measure_input(FeedbackSample* sample, const cc::Values& values) {
  if (sample == nullptr || !sample->measure) return 0.0f;
  const float block_max = cc::max_abs(values);
  sample->input_max = nan_max(sample->input_max, block_max);
  return block_max;
}

void measure_encoded(FeedbackSample* sample, const cc::EncodedBlock& block, float input_max,
                     const float* residual, size_t count) {
  if (sample == nullptr) return;
  sample->compressed = true;
  if (block.format == cc::Format::kRaw) {
    sample->non_finite = true;  // the residual was left as it was
    return;
  }
  if (!sample->measure || residual == nullptr) return;
  if (sample->limit > 0 && 0.5 * block.scale <= sample->limit * input_max) return;
  sample->residual_max =
      nan_max(sample->residual_max, cc::max_abs(cc::Values{residual, cc::DType::kFloat32, count}));
}

FeedbackMonitor::FeedbackMonitor(double limit, int rank) : limit_(limit), rank_(rank) {}

FeedbackSample FeedbackMonitor::next_sample(const std::string& name) const {
  FeedbackSample sample;
  if (!(limit_ > 0)) return sample;
  const auto it = tensors_.find(name);
  sample.measure = it == tensors_.end() || it->second.steps % kCheckEvery == 0;
  sample.limit = limit_;
  return sample;
}

uint64_t FeedbackMonitor::steps(const std::string& name) const {
  const auto it = tensors_.find(name);
  return it == tensors_.end() ? 0 : it->second.steps;
}

void FeedbackMonitor::step_done(const std::string& name, float sparsity,
                                const FeedbackSample& sample, std::vector<FeedbackAlert>& alerts) {
  if (!sample.compressed) return;
  Tensor& t = tensors_[name];
  ++t.steps;
  if (sample.non_finite) {
    ++t.non_finite;
    FeedbackAlert alert{FeedbackAlertKind::kNonFinite, name, ""};
    if (power_of_ten(t.non_finite)) {
      alert.message = "tensor '" + name + "' on rank " + std::to_string(rank_) +
                      ": gradient holds NaN or Inf after " + std::to_string(t.steps) +
                      " compressed steps";
      if (t.non_finite > 1) {
        alert.message += " (occurrence " + std::to_string(t.non_finite) + " for this tensor)";
      }
      alert.message +=
          "; it was sent uncompressed and its error feedback kept (expected when a "
          "mixed-precision loss scaler overflows; otherwise training is diverging: lower "
          "THREELC_SPARSITY / the sparsity argument, now " +
          sparsity_text(sparsity) + ")";
    }
    alerts.push_back(std::move(alert));
  }
  if (sample.measure && limit_ > 0) check_runaway(name, t, sparsity, sample, alerts);
}

void FeedbackMonitor::check_runaway(const std::string& name, Tensor& t, float sparsity,
                                    const FeedbackSample& sample,
                                    std::vector<FeedbackAlert>& alerts) const {
  // A non-finite input is the other alert's business (and no gradient scale to compare with).
  if (!std::isfinite(sample.input_max)) return;
  t.gradient_max[t.checks % kHistory] = sample.input_max;
  ++t.checks;
  const size_t kept = std::min(t.checks, kHistory);
  const float reference = *std::max_element(t.gradient_max.begin(), t.gradient_max.begin() + kept);
  const double residual = sample.residual_max;
  if (!(reference > 0.0f) || !(residual > limit_ * reference)) return;
  const double ratio = residual / reference;
  FeedbackAlert alert{FeedbackAlertKind::kRunaway, name, ""};
  if (t.reported_ratio == 0.0 ||
      (std::isfinite(t.reported_ratio) && ratio >= 2 * t.reported_ratio)) {
    t.reported_ratio = ratio;
    alert.message = "3LC error feedback of tensor '" + name + "' on rank " + std::to_string(rank_) +
                    " is running away: max |residual| " + format("%.2g", residual) + " is " +
                    ratio_text(ratio) + " the largest recent gradient max " +
                    format("%.2g", reference) + " (sparsity " + sparsity_text(sparsity) +
                    ", THREELC_FEEDBACK_LIMIT " + format("%g", limit_) +
                    "); lower THREELC_SPARSITY / the sparsity argument (1.0 keeps accuracy)";
  }
  alerts.push_back(std::move(alert));
}

}  // namespace threelc::engine
