// The collectives besides push_pull across real processes: jobs of 1..5 collectives_probe ranks
// on 127.0.0.1 with the environment threelcrun would give them. Each probe checks its own
// outputs against references it computes (see collectives_probe.cc); this test checks that every
// rank exits 0 and printed the same output hashes (bitwise-identical results), and that a short
// or garbage message is a CollectiveError naming the peer.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "test_processes.h"

namespace {

namespace ts = threelc::test_support;

// A job of `size` collectives_probe ranks in THREELC_PROBE_MODE `mode`.
std::vector<ts::RankProcess> run_job(int size, std::chrono::seconds limit,
                                     const std::string& mode) {
  return ts::run_job({.probe = COLLECTIVES_PROBE_PATH,
                      .ranks = size,
                      .limit = limit,
                      .secret = "collectives-test",
                      .log_prefix = "collectives",
                      .env = {{"THREELC_PROBE_MODE", mode}}});
}

class CollectivesJob : public ::testing::TestWithParam<int> {};

TEST_P(CollectivesJob, EveryCollectiveMatchesItsReferenceIdenticallyOnEveryRank) {
  const int size = GetParam();
  const auto ranks = run_job(size, std::chrono::seconds(100), "check");
  const auto hashes = ts::expect_same_hashes(ranks);
  const std::string log = ts::read_file(ranks[0].log);
  // allreduce_raw: 9 types x 5 ops x 5 layouts + 3 large; ring: 2 modes x (3 x 10 + 2)
  // iterations; broadcast: 3 sizes from every root; allgatherv: 3 layouts.
  EXPECT_EQ(hashes.size(), static_cast<size_t>(9 * 5 * 5 + 3 + 2 * 32 + 3 * size + 3)) << log;
  for (const auto& stat : ts::lines_starting(log, "STAT ")) std::printf("%s\n", stat.c_str());
  for (const auto& events : ts::lines_starting(log, "EVENTS ")) {
    std::printf("%s\n", events.c_str());
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, CollectivesJob, ::testing::Values(1, 2, 3, 4, 5),
                         [](const auto& p) { return std::to_string(p.param) + "ranks"; });

// Rank 1 sends rank 0 one bad message instead of taking part; rank 0 must name it.
TEST(Collectives, ShortRawChunkIsAnErrorNamingThePeer) {
  ts::expect_one_error_on_rank0(run_job(2, std::chrono::seconds(60), "short_raw"),
                                "message from rank 1 (tag 4096) has 10 bytes, expected 2000");
}

TEST(Collectives, GarbageRingBlockIsAnErrorNamingThePeer) {
  ts::expect_one_error_on_rank0(run_job(2, std::chrono::seconds(60), "garbage_ring"),
                                "malformed reduce-scatter block from rank 1");
}

}  // namespace
