// The stall inspector: deterministic, time passed in.
#include "observe/stall_inspector.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

namespace {

namespace te = threelc::engine;
using namespace std::chrono_literals;
using Clock = te::StallInspector::Clock;

constexpr Clock::time_point t0{};

TEST(CompactRanks, Ranges) {
  const auto compact = [](std::vector<int> ranks) { return te::compact_ranks(ranks); };
  EXPECT_EQ(compact({}), "");
  EXPECT_EQ(compact({4}), "4");
  EXPECT_EQ(compact({1, 2}), "1-2");
  EXPECT_EQ(compact({1, 2, 3, 5}), "1-3, 5");
  EXPECT_EQ(compact({0, 2, 4, 5, 6, 9}), "0, 2, 4-6, 9");
}

TEST(StallInspector, WarnsAboutATensorMissingRanksAfterTheLimit) {
  te::StallInspector inspector(60s, 8);
  inspector.submitted("grad/fc1", 0, t0);
  inspector.submitted("grad/fc1", 2, t0 + 5s);
  inspector.submitted("grad/fc1", 3, t0 + 10s);
  inspector.submitted("grad/fc1", 3, t0 + 11s);  // again: no change
  EXPECT_TRUE(inspector.check(t0 + 59s).empty());
  const auto warnings = inspector.check(t0 + 61s);
  ASSERT_EQ(warnings.size(), 1u);
  const std::string& w = warnings[0];
  EXPECT_NE(w.find("'grad/fc1'"), std::string::npos) << w;
  EXPECT_NE(w.find("61.0 s"), std::string::npos) << w;
  EXPECT_NE(w.find("for ranks 1, 4-7"), std::string::npos) << w;
  EXPECT_NE(w.find("submitted by ranks 0, 2-3"), std::string::npos) << w;
}

TEST(StallInspector, WarnsAgainOnlyAfterAnotherPeriod) {
  te::StallInspector inspector(10s, 2);
  inspector.submitted("x", 1, t0);
  ASSERT_EQ(inspector.check(t0 + 10s).size(), 1u);
  EXPECT_TRUE(inspector.check(t0 + 11s).empty());
  EXPECT_TRUE(inspector.check(t0 + 19s).empty());
  const auto again = inspector.check(t0 + 20s);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_NE(again[0].find("20.0 s for rank 0 (submitted by rank 1)"), std::string::npos)
      << again[0];
}

TEST(StallInspector, FinishedAndCompleteTensorsAreNotWarnedAbout) {
  te::StallInspector inspector(1s, 3);
  for (int rank = 0; rank < 3; ++rank) inspector.submitted("complete", rank, t0);
  inspector.submitted("done", 0, t0);
  inspector.finished("done");
  inspector.finished("never-submitted");
  EXPECT_TRUE(inspector.check(t0 + 100s).empty());
  EXPECT_EQ(inspector.pending(), 1u);
  inspector.finished("complete");
  EXPECT_EQ(inspector.pending(), 0u);
}

TEST(StallInspector, OldestFirstThenByName) {
  te::StallInspector inspector(5s, 2);
  inspector.submitted("b", 0, t0 + 1s);
  inspector.submitted("c", 0, t0);
  inspector.submitted("a", 0, t0 + 1s);
  const auto warnings = inspector.check(t0 + 10s);
  ASSERT_EQ(warnings.size(), 3u);
  EXPECT_NE(warnings[0].find("'c'"), std::string::npos);
  EXPECT_NE(warnings[1].find("'a'"), std::string::npos);
  EXPECT_NE(warnings[2].find("'b'"), std::string::npos);
  // Measured from the first submission: "c" is not due at t0 + 5.5 s after a finish/resubmit.
  inspector.finished("c");
  inspector.submitted("c", 1, t0 + 6s);
  EXPECT_TRUE(inspector.check(t0 + 10s).empty());
  EXPECT_EQ(inspector.check(t0 + 11s).size(), 1u);
}

TEST(StallInspector, NamesAtMostMaxNamedTensors) {
  te::StallInspector inspector(1s, 2, 3);
  for (int i = 0; i < 10; ++i) inspector.submitted("t" + std::to_string(i), 0, t0);
  const auto warnings = inspector.check(t0 + 2s);
  ASSERT_EQ(warnings.size(), 4u);
  EXPECT_NE(warnings[3].find("7 more tensors"), std::string::npos) << warnings[3];
  // All ten count as warned.
  EXPECT_TRUE(inspector.check(t0 + 2500ms).empty());
}

TEST(StallInspector, ZeroDisables) {
  te::StallInspector inspector(0s, 4);
  EXPECT_FALSE(inspector.enabled());
  inspector.submitted("x", 0, t0);
  EXPECT_EQ(inspector.pending(), 0u);
  EXPECT_TRUE(inspector.check(t0 + 1000s).empty());
}

TEST(StallInspector, RejectsRanksOutsideTheJob) {
  te::StallInspector inspector(1s, 4);
  EXPECT_THROW(inspector.submitted("x", 4, t0), std::invalid_argument);
  EXPECT_THROW(inspector.submitted("x", -1, t0), std::invalid_argument);
  EXPECT_THROW(te::StallInspector(1s, 0), std::invalid_argument);
}

}  // namespace
