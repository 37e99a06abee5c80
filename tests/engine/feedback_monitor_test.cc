// The error-feedback monitor (engine/src/collectives/feedback_monitor.h), fed numbers directly,
// the measurements the collectives take around an encoding, and the codec's max_abs under it.
#include "collectives/feedback_monitor.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "threelc/compression/codec.h"
#include "threelc/compression/float16.h"

namespace {

namespace te = threelc::engine;
namespace cc = threelc::compression;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

te::FeedbackSample plain() {
  te::FeedbackSample s;
  s.compressed = true;
  return s;
}

te::FeedbackSample measured(float input_max, float residual_max) {
  te::FeedbackSample s = plain();
  s.measure = true;
  s.input_max = input_max;
  s.residual_max = residual_max;
  return s;
}

te::FeedbackSample non_finite() {
  te::FeedbackSample s = plain();
  s.non_finite = true;
  return s;
}

// One step of `name` the way the executor runs it: measured when the monitor asks for it.
std::vector<te::FeedbackAlert> step(te::FeedbackMonitor& m, const std::string& name, float g,
                                    float e, float sparsity = 1.9f) {
  std::vector<te::FeedbackAlert> alerts;
  m.step_done(name, sparsity, m.next_sample(name).measure ? measured(g, e) : plain(), alerts);
  return alerts;
}

// --- max_abs --------------------------------------------------------------------------------

TEST(MaxAbs, EveryIsaAgreesAndNaNWins) {
  std::vector<float> x(1000);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(static_cast<float>(i)) * 3.0f;
  x[517] = -7.5f;
  const float inf = std::numeric_limits<float>::infinity();
  for (cc::Isa isa : cc::supported_isas()) {
    SCOPED_TRACE(std::string(cc::isa_name(isa)));
    for (size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{33}, size_t{518}, size_t{1000}}) {
      float want = 0.0f;
      for (size_t i = 0; i < n; ++i) want = std::max(want, std::fabs(x[i]));
      EXPECT_EQ(cc::max_abs(cc::Values{x.data(), cc::DType::kFloat32, n}, isa), want) << n;
    }
    std::vector<float> y = x;
    y[999] = -inf;
    EXPECT_EQ(cc::max_abs(cc::Values{y.data(), cc::DType::kFloat32, y.size()}, isa), inf);
    y[3] = std::numeric_limits<float>::quiet_NaN();
    EXPECT_TRUE(std::isnan(cc::max_abs(cc::Values{y.data(), cc::DType::kFloat32, y.size()}, isa)));
  }
  EXPECT_EQ(cc::max_abs(cc::Values{}), 0.0f);
}

TEST(MaxAbs, HalfPrecisionIsWidened) {
  std::vector<uint16_t> h = {cc::float_to_half(1.5f), cc::float_to_half(-4.0f),
                             cc::float_to_half(2.0f)};
  EXPECT_EQ(cc::max_abs(cc::Values{h.data(), cc::DType::kFloat16, h.size()}), 4.0f);
}

// --- measurements around an encoding ------------------------------------------------------------

TEST(FeedbackMeasure, MeasuresInputAndUpdatedErrorOnlyWhenAsked) {
  std::vector<float> x = {1.0f, -3.0f, 0.25f, 2.0f};
  std::vector<float> e(x.size(), 0.0f);
  std::vector<uint8_t> out(cc::max_block_bytes(x.size()));
  const cc::Values values{x.data(), cc::DType::kFloat32, x.size()};
  te::FeedbackSample sample;
  sample.measure = true;  // limit 0: every block's residual is measured
  EXPECT_EQ(te::measure_input(&sample, values), 3.0f);
  cc::EncodedBlock block;
  ASSERT_TRUE(cc::encode(values, e.data(), cc::EncodeOptions{1.0f}, out, &block).ok());
  te::measure_encoded(&sample, block, 3.0f, e.data(), e.size());
  float want = 0.0f;
  for (float v : e) want = std::max(want, std::fabs(v));
  EXPECT_TRUE(sample.compressed);
  EXPECT_FALSE(sample.non_finite);
  EXPECT_EQ(sample.input_max, 3.0f);
  EXPECT_EQ(sample.residual_max, want);
  EXPECT_GT(want, 0.0f);
  // Not a sampled step: nothing measured, but the encoding still counts.
  te::FeedbackSample quiet;
  EXPECT_EQ(te::measure_input(&quiet, values), 0.0f);
  te::measure_encoded(&quiet, block, 0.0f, e.data(), e.size());
  EXPECT_TRUE(quiet.compressed);
  EXPECT_EQ(quiet.input_max, 0.0f);
  EXPECT_EQ(quiet.residual_max, 0.0f);
  EXPECT_EQ(te::measure_input(nullptr, values), 0.0f);  // no sample: nothing happens
  te::measure_encoded(nullptr, block, 0.0f, e.data(), e.size());
}

// A block's residuals are at most half its scale: where that is within limit * the block's
// input max, the residual pass is skipped (it cannot decide the check); elsewhere it is taken.
TEST(FeedbackMeasure, TheErrorPassIsSkippedWhereItCannotDecideTheCheck) {
  std::vector<float> x = {1.0f, -3.0f, 0.25f, 2.0f};
  std::vector<uint8_t> out(cc::max_block_bytes(x.size()));
  const cc::Values values{x.data(), cc::DType::kFloat32, x.size()};
  auto run = [&](std::vector<float> e) {
    te::FeedbackSample sample;
    sample.measure = true;
    sample.limit = 100;
    const float input_max = te::measure_input(&sample, values);
    cc::EncodedBlock block;
    EXPECT_TRUE(cc::encode(values, e.data(), cc::EncodeOptions{1.9f}, out, &block).ok());
    te::measure_encoded(&sample, block, input_max, e.data(), e.size());
    EXPECT_EQ(sample.input_max, 3.0f);
    float want = 0.0f;
    for (float v : e) want = std::max(want, std::fabs(v));
    return std::pair<float, float>(sample.residual_max, want);
  };
  // Healthy: scale / 2 = 0.95 * 3.5 <= 100 * 3, skipped.
  EXPECT_EQ(run({0.5f, 0.0f, 0.0f, 0.0f}).first, 0.0f);
  // A residual far out of scale: measured exactly.
  const auto [got, want] = run({0.0f, 0.0f, 2000.0f, -1.0f});
  EXPECT_GT(want, 300.0f);
  EXPECT_EQ(got, want);
}

TEST(FeedbackMeasure, ARawBlockIsNonFiniteAndKeepsTheError) {
  std::vector<float> x = {1.0f, std::numeric_limits<float>::quiet_NaN(), 2.0f};
  std::vector<float> e = {0.5f, 0.25f, -0.5f};
  const std::vector<float> e_before = e;
  std::vector<uint8_t> out(cc::max_block_bytes(x.size()));
  const cc::Values values{x.data(), cc::DType::kFloat32, x.size()};
  te::FeedbackSample sample;
  sample.measure = true;
  const float input_max = te::measure_input(&sample, values);
  cc::EncodedBlock block;
  ASSERT_TRUE(cc::encode(values, e.data(), cc::EncodeOptions{1.9f}, out, &block).ok());
  EXPECT_EQ(block.format, cc::Format::kRaw);
  te::measure_encoded(&sample, block, input_max, e.data(), e.size());
  EXPECT_TRUE(sample.non_finite);
  EXPECT_TRUE(std::isnan(sample.input_max));
  EXPECT_EQ(e, e_before);
}

// --- the monitor --------------------------------------------------------------------------------

TEST(FeedbackMonitor, SamplesTheFirstAndEveryEighthStep) {
  te::FeedbackMonitor m(100, 0);
  std::vector<uint64_t> sampled;
  for (uint64_t s = 1; s <= 40; ++s) {
    if (m.next_sample("w").measure) sampled.push_back(s);
    step(m, "w", 1.0f, 0.5f);
  }
  EXPECT_EQ(sampled, (std::vector<uint64_t>{1, 9, 17, 25, 33}));
  EXPECT_EQ(m.steps("w"), 40u);
  EXPECT_EQ(m.steps("other"), 0u);
  // Tensors count separately.
  EXPECT_TRUE(m.next_sample("other").measure);
  EXPECT_EQ(m.next_sample("other").limit, 100.0);
}

TEST(FeedbackMonitor, UncompressedSamplesCountForNothing) {
  te::FeedbackMonitor m(100, 0);
  std::vector<te::FeedbackAlert> alerts;
  te::FeedbackSample s = measured(1.0f, 1e9f);
  s.compressed = false;
  s.non_finite = true;
  m.step_done("w", 1.0f, s, alerts);
  EXPECT_TRUE(alerts.empty());
  EXPECT_EQ(m.steps("w"), 0u);
}

TEST(FeedbackMonitor, HealthyFeedbackRaisesNothing) {
  te::FeedbackMonitor m(100, 0);
  // s = 1.9 keeps |e| within s / (2 - s) = 19 times the gradient: far below the limit.
  for (int s = 0; s < 200; ++s) {
    EXPECT_TRUE(step(m, "w", 2.0f + static_cast<float>(s % 3), 19.0f * 2.0f).empty()) << s;
  }
}

TEST(FeedbackMonitor, RunawayIsReportedWhenTheResidualOutlivesTheGradients) {
  te::FeedbackMonitor m(100, 2);
  // A huge gradient once, then tiny ones while the residual decays by 0.9 per step.
  float residual = 0.9e6f;
  std::vector<te::FeedbackAlert> first;
  int first_step = 0;
  for (int s = 1; s <= 81 && first.empty(); ++s) {
    first = step(m, "fc1.weight", s == 1 ? 1e6f : 1e-6f, residual);
    if (!first.empty()) first_step = s;
    residual *= 0.9f;
  }
  ASSERT_EQ(first.size(), 1u);
  // Gref keeps the huge gradient for 8 sampled steps: the 1st, 9th, ..., 57th; the 65th is the
  // first whose last 8 checks are all tiny.
  EXPECT_EQ(first_step, 65);
  const te::FeedbackAlert& a = first[0];
  EXPECT_EQ(a.kind, te::FeedbackAlertKind::kRunaway);
  EXPECT_EQ(a.tensor, "fc1.weight");
  for (const char* part :
       {"3LC error feedback of tensor 'fc1.weight' on rank 2 is running away", "max |residual| ",
        "the largest recent gradient max 1e-06", "sparsity 1.9", "THREELC_FEEDBACK_LIMIT 100",
        "lower THREELC_SPARSITY", "sparsity argument"}) {
    EXPECT_TRUE(contains(a.message, part)) << part << " in: " << a.message;
  }
}

TEST(FeedbackMonitor, RunawayReportsAgainOnlyWhenTheRatioDoubles) {
  te::FeedbackMonitor m(100, 0);
  std::vector<te::FeedbackAlert> all;
  auto sampled_step = [&](float g, float e) {
    for (uint64_t i = 0; i < te::FeedbackMonitor::kCheckEvery; ++i) {
      for (auto& alert : step(m, "t", g, e)) all.push_back(std::move(alert));
    }
  };
  sampled_step(1.0f, 150.0f);  // ratio 150: reported
  sampled_step(1.0f, 250.0f);  // 250 < 2 * 150: counted only
  sampled_step(1.0f, 299.0f);  // still below 300
  sampled_step(1.0f, 300.0f);  // doubled: reported
  sampled_step(1.0f, 50.0f);   // below the limit: nothing
  sampled_step(1.0f, 590.0f);  // 590 < 600
  ASSERT_EQ(all.size(), 5u);
  std::vector<bool> reported;
  for (const auto& alert : all) {
    EXPECT_EQ(alert.kind, te::FeedbackAlertKind::kRunaway);
    reported.push_back(!alert.message.empty());
  }
  EXPECT_EQ(reported, (std::vector<bool>{true, false, false, true, false}));
  EXPECT_TRUE(contains(all[0].message, "150x")) << all[0].message;
  EXPECT_TRUE(contains(all[3].message, "300x")) << all[3].message;
}

TEST(FeedbackMonitor, GrefIsTheLargestOfTheLastEightChecks) {
  te::FeedbackMonitor m(10, 0);
  auto sampled_step = [&](float g, float e) {
    std::vector<te::FeedbackAlert> alerts;
    for (uint64_t i = 0; i < te::FeedbackMonitor::kCheckEvery; ++i) {
      for (auto& alert : step(m, "t", g, e)) alerts.push_back(std::move(alert));
    }
    return alerts.size();
  };
  EXPECT_EQ(sampled_step(100.0f, 1.0f), 0u);
  for (int k = 0; k < 7; ++k) EXPECT_EQ(sampled_step(1.0f, 500.0f), 0u) << k;  // Gref 100
  EXPECT_EQ(sampled_step(1.0f, 500.0f), 1u);  // 100 has left the history: 500 > 10 * 1
}

TEST(FeedbackMonitor, ZeroGradientsNeverRunAway) {
  te::FeedbackMonitor m(100, 0);
  for (int s = 0; s < 100; ++s) EXPECT_TRUE(step(m, "z", 0.0f, 0.0f).empty());
}

TEST(FeedbackMonitor, NonFiniteIsReportedAtPowersOfTen) {
  te::FeedbackMonitor m(100, 3);
  std::vector<te::FeedbackAlert> alerts;
  for (int s = 0; s < 5; ++s) m.step_done("x", 1.5f, plain(), alerts);
  EXPECT_TRUE(alerts.empty());
  std::vector<uint64_t> reported;
  for (uint64_t k = 1; k <= 150; ++k) {
    m.step_done("x", 1.5f, non_finite(), alerts);
    ASSERT_EQ(alerts.size(), k);
    EXPECT_EQ(alerts.back().kind, te::FeedbackAlertKind::kNonFinite);
    EXPECT_EQ(alerts.back().tensor, "x");
    if (!alerts.back().message.empty()) reported.push_back(k);
  }
  EXPECT_EQ(reported, (std::vector<uint64_t>{1, 10, 100}));
  const std::string& first = alerts[0].message;
  for (const char* part : {"tensor 'x' on rank 3: gradient holds NaN or Inf after 6 compressed "
                           "steps; it was sent uncompressed and its error feedback kept",
                           "mixed-precision loss scaler", "lower THREELC_SPARSITY", "1.5"}) {
    EXPECT_TRUE(contains(first, part)) << part << " in: " << first;
  }
  EXPECT_TRUE(contains(alerts[9].message, "occurrence 10")) << alerts[9].message;
}

TEST(FeedbackMonitor, ANonFiniteSampleSkipsTheRunawayCheck) {
  te::FeedbackMonitor m(100, 0);
  std::vector<te::FeedbackAlert> alerts;
  te::FeedbackSample s = measured(std::numeric_limits<float>::quiet_NaN(), 1e9f);
  s.non_finite = true;
  m.step_done("n", 1.0f, s, alerts);
  ASSERT_EQ(alerts.size(), 1u);
  EXPECT_EQ(alerts[0].kind, te::FeedbackAlertKind::kNonFinite);
  // The NaN did not enter the history: a later healthy step compares with its own gradient.
  for (int k = 0; k < 7; ++k) m.step_done("n", 1.0f, plain(), alerts);
  m.step_done("n", 1.0f, measured(1.0f, 2.0f), alerts);
  EXPECT_EQ(alerts.size(), 1u);
}

TEST(FeedbackMonitor, LimitZeroDisablesTheRunawayCheckOnly) {
  te::FeedbackMonitor m(0, 0);
  std::vector<te::FeedbackAlert> alerts;
  for (int s = 0; s < 50; ++s) {
    EXPECT_FALSE(m.next_sample("w").measure);
    m.step_done("w", 1.9f, measured(1e-6f, 1e6f), alerts);
  }
  EXPECT_TRUE(alerts.empty());
  m.step_done("w", 1.9f, non_finite(), alerts);
  ASSERT_EQ(alerts.size(), 1u);
  EXPECT_EQ(alerts[0].kind, te::FeedbackAlertKind::kNonFinite);
  EXPECT_TRUE(contains(alerts[0].message, "after 51 compressed steps")) << alerts[0].message;
}

}  // namespace
