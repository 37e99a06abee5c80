// THREELC_HIERARCHICAL's bookkeeping without a job: how a fused buffer is cut into segments
// and named for error feedback, and how ranks group by host. The collective itself runs in
// tests/engine/jobs (test_hierarchical_allreduce), with real rank processes.
#include <gtest/gtest.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "collectives/hierarchical.h"
#include "runtime/host_topology.h"

namespace {

namespace te = threelc::engine;

std::vector<std::string> describe(const std::vector<te::TensorSlice>& slices) {
  std::vector<std::string> out;
  out.reserve(slices.size());
  for (const auto& s : slices) {
    out.push_back(s.name + "@" + std::to_string(s.offset) + ":" + std::to_string(s.count));
  }
  return out;
}

TEST(HierarchicalSegment, CutsThroughTensorsAndNamesTheirPieces) {
  const std::vector<te::TensorSlice> tensors = {{"a", 0, 5}, {"b", 5, 3}};
  const auto first = te::hierarchical_segment(tensors, 8, 3, 0);
  EXPECT_EQ(first.counts, (std::vector<size_t>{3, 3, 2}));
  EXPECT_EQ(first.offset, 0u);
  EXPECT_EQ(first.count, 3u);
  EXPECT_EQ(describe(first.slices), (std::vector<std::string>{"a#0+3@0:3"}));
  const auto middle = te::hierarchical_segment(tensors, 8, 3, 1);
  EXPECT_EQ(middle.offset, 3u);
  EXPECT_EQ(describe(middle.slices), (std::vector<std::string>{"a#3+2@0:2", "b#0+1@2:1"}));
  const auto last = te::hierarchical_segment(tensors, 8, 3, 2);
  EXPECT_EQ(last.offset, 6u);
  EXPECT_EQ(describe(last.slices), (std::vector<std::string>{"b#1+2@0:2"}));
}

TEST(HierarchicalSegment, PaddingBeyondTheTensorsIsOnePiece) {
  const std::vector<te::TensorSlice> tensors = {{"a", 0, 5}, {"b", 5, 3}};
  const auto last = te::hierarchical_segment(tensors, 9, 3, 2);
  EXPECT_EQ(last.counts, (std::vector<size_t>{3, 3, 3}));
  EXPECT_EQ(describe(last.slices), (std::vector<std::string>{"b#1+2@0:2", "#padding@2:1"}));
  // a segment wholly in the padding
  const std::vector<te::TensorSlice> one = {{"a", 0, 1}};
  const auto pad = te::hierarchical_segment(one, 4, 4, 3);
  EXPECT_EQ(describe(pad.slices), (std::vector<std::string>{"#padding@0:1"}));
}

TEST(HierarchicalSegment, MorePartsThanElementsLeavesEmptySegments) {
  const std::vector<te::TensorSlice> x = {{"x", 0, 2}};
  const auto s = te::hierarchical_segment(x, 2, 4, 3);
  EXPECT_EQ(s.counts, (std::vector<size_t>{1, 1, 0, 0}));
  EXPECT_EQ(s.count, 0u);
  EXPECT_TRUE(s.slices.empty());
  EXPECT_THROW(te::hierarchical_segment(x, 2, 4, 4), std::invalid_argument);
  EXPECT_THROW(te::hierarchical_segment(x, 2, 0, 0), std::invalid_argument);
}

te::Identity identity(int rank, std::vector<int> host_of_rank) {
  te::Identity id;
  id.rank = rank;
  id.size = static_cast<int>(host_of_rank.size());
  id.cross_rank = host_of_rank[static_cast<size_t>(rank)];
  id.cross_size = 0;
  for (int h : host_of_rank) id.cross_size = std::max(id.cross_size, h + 1);
  id.host_of_rank = std::move(host_of_rank);
  return id;
}

TEST(HostGroups, RanksOfOneHostAndTheirPeersOnTheOthers) {
  std::string why_not;
  // ranks interleaved over hosts: 0 and 2 on host 0, 1 and 3 on host 1, 4 and 5 on host 2
  const auto g = te::host_groups(identity(3, {0, 1, 0, 1, 2, 2}), why_not);
  ASSERT_TRUE(g.has_value()) << why_not;
  EXPECT_EQ(g->local, (std::vector<int>{1, 3}));
  EXPECT_EQ(g->local_index, 1);
  EXPECT_EQ(g->cross, (std::vector<int>{2, 3, 5}));
  EXPECT_EQ(g->cross_index, 1);
}

TEST(HostGroups, RefusedWithAReasonWhenHostsDifferOrHoldOneRank) {
  std::string why_not;
  EXPECT_FALSE(te::host_groups(identity(0, {0, 0, 1}), why_not).has_value());
  EXPECT_EQ(why_not, "hosts run different numbers of ranks (host 0: 2, host 1: 1)");
  EXPECT_FALSE(te::host_groups(identity(1, {0, 1, 2}), why_not).has_value());
  EXPECT_EQ(why_not, "every host runs one rank");
  EXPECT_TRUE(te::host_groups(identity(1, {0, 0, 0}), why_not).has_value());
}

TEST(HostGroups, SameRanksPerHostIsHorovodsHomogeneous) {
  EXPECT_TRUE(te::same_ranks_per_host(identity(0, {0})));
  EXPECT_TRUE(te::same_ranks_per_host(identity(0, {0, 1, 0, 1})));
  EXPECT_TRUE(te::same_ranks_per_host(identity(2, {0, 1, 2})));  // one rank on each
  EXPECT_FALSE(te::same_ranks_per_host(identity(0, {0, 0, 1})));
  EXPECT_FALSE(te::same_ranks_per_host(identity(3, {0, 1, 0, 1, 2})));
}

}  // namespace
