// push_pull_sum across real processes: jobs of 1..5 push_pull_probe ranks on 127.0.0.1 with the
// environment threelcrun would give them. Each probe checks its own results against the exact
// sums (see push_pull_probe.cc); this test checks that every rank exits 0 and that every rank
// printed the same output hashes (bitwise-identical results).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "test_processes.h"

namespace {

namespace ts = threelc::test_support;

// A job of `size` push_pull_probe ranks in THREELC_PROBE_MODE `mode`.
std::vector<ts::RankProcess> run_job(int size, std::chrono::seconds limit,
                                     const std::string& mode = "check") {
  return ts::run_job({.probe = PUSH_PULL_PROBE_PATH,
                      .ranks = size,
                      .limit = limit,
                      .secret = "push-pull-test",
                      .log_prefix = "push_pull",
                      .env = {{"THREELC_PROBE_MODE", mode}}});
}

class PushPullJob : public ::testing::TestWithParam<int> {};

TEST_P(PushPullJob, SumsExactlyOrWithinTheBoundAndIdenticallyOnEveryRank) {
  const auto ranks = run_job(GetParam(), std::chrono::seconds(90));
  const auto hashes = ts::expect_same_hashes(ranks);
  const std::string log = ts::read_file(ranks[0].log);
  // 6 layouts x 2 modes; 20 iterations each except 3 for the large one.
  EXPECT_EQ(hashes.size(), size_t{5 * 2 * 20 + 2 * 3}) << log;
  for (const auto& stat : ts::lines_starting(log, "STAT ")) std::printf("%s\n", stat.c_str());
}

TEST(PushPull, MalformedBlockIsAnErrorNamingThePeer) {
  ts::expect_one_error_on_rank0(run_job(2, std::chrono::seconds(60), "malformed"),
                                "malformed push block from rank 1");
}

// Values and residuals reachable only through a BlockCodec (as device memory is): the same bits as
// the host path, and no direct access (the probe would crash).
TEST(PushPull, ValuesBehindACodecGiveTheHostPathsBits) {
  const auto ranks = run_job(3, std::chrono::seconds(60), "foreign");
  EXPECT_EQ(ts::expect_same_hashes(ranks).size(), 1u) << ts::read_file(ranks[0].log);
}

INSTANTIATE_TEST_SUITE_P(Ranks, PushPullJob, ::testing::Values(1, 2, 3, 4, 5),
                         [](const auto& p) { return std::to_string(p.param) + "ranks"; });

}  // namespace
