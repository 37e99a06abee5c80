// The Coordinator's stall timeout (THREELC_STALL_TIMEOUT): a tensor some ranks never submit
// fails on every rank, naming the missing ranks and the counterpart they submitted instead.
#include <gtest/gtest.h>

#include "coordinator_cycles.h"

namespace coordinator_test {
namespace {

te::Coordinator::Options timeout_options(int size, Clock::duration timeout,
                                         Clock::duration stall = Clock::duration::zero()) {
  te::Coordinator::Options o = options(size, 0, stall);
  o.stall_timeout = timeout;
  return o;
}

TEST(CoordinatorStallTimeout, ANameMismatchFailsOnEveryRankNamingBothTensors) {
  te::Coordinator c(timeout_options(2, 2s, 1s));
  EXPECT_TRUE(cycle(c, {{op_request("grad.a")}, {op_request("grad.b")}}).responses.empty());
  EXPECT_TRUE(cycle(c, {{}, {}}, t0 + 1999ms).responses.empty());
  const auto out = cycle(c, {{}, {}}, t0 + 2s);
  ASSERT_EQ(out.responses.size(), 2u);
  for (const te::Response& r : out.responses) {
    EXPECT_EQ(r.type, te::ResponseType::kError);
    EXPECT_EQ(r.kind, te::OpKind::kAllreduce);
    EXPECT_EQ(r.error_code, THREELC_EMISMATCH);
  }
  EXPECT_EQ(names_of(out), (Names{"grad.a", "grad.b"}));
  EXPECT_EQ(out.responses[0].tensors[0], op_request("grad.a"));
  EXPECT_EQ(out.responses[0].error_message,
            "tensor 'grad.a' was submitted by rank 0 but not by rank 1 within 2.0 s "
            "(THREELC_STALL_TIMEOUT); rank 1 has 'grad.b' pending");
  EXPECT_EQ(out.responses[1].error_message,
            "tensor 'grad.b' was submitted by rank 1 but not by rank 0 within 2.0 s "
            "(THREELC_STALL_TIMEOUT); rank 0 has 'grad.a' pending");
  // Forgotten entirely: no answer, no stall warning, and the names may be submitted again.
  EXPECT_TRUE(cycle(c, {{}, {}}, t0 + 3s).responses.empty());
  EXPECT_TRUE(c.stall_warnings(t0 + 10s).empty());
  EXPECT_TRUE(cycle(c, {{op_request("grad.a")}, {}}, t0 + 10s).responses.empty());
  const auto later =
      cycle(c, {{op_request("common")}, {op_request("grad.a"), op_request("common")}}, t0 + 11s);
  EXPECT_EQ(names_of(later), (Names{"grad.a", "common"}));
  for (const te::Response& r : later.responses) EXPECT_EQ(r.type, te::ResponseType::kRun);
}

TEST(CoordinatorStallTimeout, ACounterpartThatTimedOutEarlierIsStillNamed) {
  te::Coordinator c(timeout_options(2, 2s));
  cycle(c, {{op_request("a")}, {}}, t0);
  cycle(c, {{}, {op_request("b")}}, t0 + 500ms);
  auto out = cycle(c, {{}, {}}, t0 + 2s);
  ASSERT_EQ(names_of(out), (Names{"a"}));
  EXPECT_TRUE(contains(out.responses[0].error_message, "rank 1 has 'b' pending"))
      << out.responses[0].error_message;
  out = cycle(c, {{}, {}}, t0 + 2500ms);
  ASSERT_EQ(names_of(out), (Names{"b"}));
  EXPECT_EQ(out.responses[0].error_message,
            "tensor 'b' was submitted by rank 1 but not by rank 0 within 2.0 s "
            "(THREELC_STALL_TIMEOUT); rank 0 had 'a' pending until it timed out");
  // Long after, the old failure is no longer mentioned.
  cycle(c, {{}, {op_request("c")}}, t0 + 10s);
  out = cycle(c, {{}, {}}, t0 + 12s);
  ASSERT_EQ(names_of(out), (Names{"c"}));
  EXPECT_TRUE(contains(out.responses[0].error_message, "rank 0 has nothing pending"))
      << out.responses[0].error_message;
}

TEST(CoordinatorStallTimeout, JoinedRanksAreNotMissingAndJoinsNeverTimeOut) {
  te::Coordinator c(timeout_options(4, 5s));
  const te::OpRequest join = op_request(te::kJoinName, te::OpKind::kJoin, {});
  cycle(c, {{op_request("x")}, {}, {join}, {}}, t0);
  cycle(c, {{}, {op_request("y"), op_request("z"), op_request("w"), op_request("v")}, {}, {}},
        t0 + 3s);
  const auto out = cycle(c, {{}, {}, {}, {}}, t0 + 5s);
  ASSERT_EQ(out.responses.size(), 1u);
  EXPECT_EQ(out.responses[0].type, te::ResponseType::kError);
  EXPECT_EQ(out.responses[0].error_message,
            "tensor 'x' was submitted by rank 0 (rank 2 has joined) but not by ranks 1, 3 within "
            "5.0 s (THREELC_STALL_TIMEOUT); rank 1 has 'y', 'z', 'w' and 1 more pending, rank 3 "
            "has nothing pending");
  // y, z, w, v fail 5 s after they arrived; the join waits on.
  const auto next = cycle(c, {{}, {}, {}, {}}, t0 + 1000s);
  EXPECT_EQ(names_of(next), (Names{"y", "z", "w", "v"}));
  for (const te::Response& r : next.responses) EXPECT_EQ(r.type, te::ResponseType::kError);
  const auto done = cycle(c, {{join}, {join}, {}, {join}}, t0 + 1001s);
  ASSERT_EQ(done.responses.size(), 1u);
  EXPECT_EQ(done.responses[0].kind, te::OpKind::kJoin);
}

TEST(CoordinatorStallTimeout, ATensorThatBecomesReadyInTimeRuns) {
  te::Coordinator c(timeout_options(2, 2s));
  cycle(c, {{op_request("a")}, {}}, t0);
  const auto out = cycle(c, {{}, {op_request("a")}}, t0 + 5s);
  ASSERT_EQ(names_of(out), (Names{"a"}));
  EXPECT_EQ(out.responses[0].type, te::ResponseType::kRun);
}

TEST(CoordinatorStallTimeout, ZeroDisablesIt) {
  te::Coordinator c(timeout_options(2, Clock::duration::zero()));
  cycle(c, {{op_request("a")}, {}}, t0);
  EXPECT_TRUE(cycle(c, {{}, {}}, t0 + 100000s).responses.empty());
  EXPECT_EQ(names_of(cycle(c, {{}, {op_request("a")}}, t0 + 100001s)), (Names{"a"}));
}

}  // namespace
}  // namespace coordinator_test
