// How push_pull cuts a fused buffer into segments, chunks and blocks, and the error store.
#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

#include "collectives/block_plan.h"
#include "error_feedback.h"

namespace te = threelc::engine;

namespace {

std::vector<te::TensorSlice> layout(const std::vector<size_t>& sizes) {
  std::vector<te::TensorSlice> out;
  size_t offset = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    out.push_back({"t" + std::to_string(i), offset, sizes[i]});
    offset += sizes[i];
  }
  return out;
}

TEST(BlockPlan, SegmentsSplitEvenlyWithTheRemainderFirst) {
  EXPECT_EQ(te::segment_start(10, 3, 0), 0u);
  EXPECT_EQ(te::segment_start(10, 3, 1), 4u);
  EXPECT_EQ(te::segment_start(10, 3, 2), 7u);
  EXPECT_EQ(te::segment_start(10, 3, 3), 10u);
  EXPECT_EQ(te::segment_start(2, 4, 3), 2u);  // fewer elements than ranks: empty segments
}

TEST(BlockPlan, BlocksAreChunkAndTensorIntersectionsCoveringEverything) {
  const auto tensors = layout({5, 0, 3, 12});  // 20 elements
  // 2 ranks: segments [0,10) and [10,20); chunks of 4 values from each segment's start.
  const auto plan = te::plan_blocks(20, tensors, 2, 16);
  const std::vector<std::vector<size_t>> expected = {
      // offset, count, tensor
      {0, 4, 0},  {4, 1, 0},  {5, 3, 2}, {8, 2, 3},  // segment 0
      {10, 4, 3}, {14, 4, 3}, {18, 2, 3}};           // segment 1
  ASSERT_EQ(plan.blocks.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(plan.blocks[i].offset, expected[i][0]) << i;
    EXPECT_EQ(plan.blocks[i].count, expected[i][1]) << i;
    EXPECT_EQ(plan.blocks[i].tensor, expected[i][2]) << i;
  }
  EXPECT_EQ(plan.segment(0).size(), 4u);
  EXPECT_EQ(plan.segment(1).size(), 3u);
}

TEST(BlockPlan, RejectsLayoutsThatDoNotTileTheBuffer) {
  EXPECT_THROW(te::plan_blocks(10, layout({4, 5}), 2, 1024), std::invalid_argument);
  auto gap = layout({4, 6});
  gap[1].offset = 5;
  EXPECT_THROW(te::plan_blocks(11, gap, 2, 1024), std::invalid_argument);
  auto twice = layout({4, 6});
  twice[1].name = "t0";
  EXPECT_THROW(te::plan_blocks(10, twice, 2, 1024), std::invalid_argument);
  EXPECT_THROW(te::plan_blocks(10, layout({10}), 2, 3), std::invalid_argument);
  EXPECT_EQ(te::plan_blocks(0, {}, 3, 1024).blocks.size(), 0u);
}

TEST(ErrorFeedbackStore, ZeroOnFirstUseKeptAfterwardsAndRestartedForAnotherSize) {
  te::ErrorFeedbackStore store;
  auto a = store.get("w", 3);
  ASSERT_EQ(a.size(), 3u);
  EXPECT_EQ(a[1], 0.0f);
  a[1] = 2.5f;
  EXPECT_EQ(store.get("w", 3)[1], 2.5f);
  auto resized = store.get("w", 4);
  ASSERT_EQ(resized.size(), 4u);
  for (float e : resized) EXPECT_EQ(e, 0.0f);
  resized[0] = 1.0f;
  EXPECT_EQ(store.get("w", 4)[0], 1.0f);
  EXPECT_EQ(store.get("b", 0).size(), 0u);
  EXPECT_EQ(store.size(), 2u);
}

}  // namespace
