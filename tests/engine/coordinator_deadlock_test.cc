// The Coordinator's deadlock detection: when every rank that has not joined reports a thread
// blocked waiting for its operations and nothing runs for the deadlock timeout
// (THREELC_DEADLOCK_TIMEOUT), every pending tensor fails, naming what each rank waits for.
#include <gtest/gtest.h>

#include "coordinator_cycles.h"

namespace coordinator_test {
namespace {

te::Coordinator::Options deadlock_options(int size, Clock::duration timeout) {
  te::Coordinator::Options o = options(size);
  o.stall_timeout = Clock::duration::zero();
  o.deadlock_timeout = timeout;
  return o;
}

// One cycle in which rank r reports `blocked[r]`.
te::CycleResponse cycle_blocked(te::Coordinator& c,
                                const std::vector<std::vector<te::OpRequest>>& by_rank,
                                const std::vector<bool>& blocked, Clock::time_point now) {
  for (size_t rank = 0; rank < by_rank.size(); ++rank) {
    c.add(static_cast<int>(rank), by_rank[rank], false, now, blocked[rank]);
  }
  return c.respond(now);
}

std::vector<bool> all_blocked() { return {true, true}; }

TEST(CoordinatorDeadlock, FailsEveryPendingTensorAfterTheTimeoutNamingWhatEachRankWaitsFor) {
  te::Coordinator c(deadlock_options(2, 3s));
  const te::OpRequest barrier = op_request("barrier.0", te::OpKind::kBarrier, {});
  EXPECT_TRUE(
      cycle_blocked(c, {{op_request("x", te::OpKind::kAllgather)}, {barrier}}, all_blocked(), t0)
          .responses.empty());
  EXPECT_TRUE(
      cycle_blocked(c, {{}, {}}, all_blocked(), t0 + 1s).responses.empty());  // stuck from here
  EXPECT_TRUE(cycle_blocked(c, {{}, {}}, all_blocked(), t0 + 3999ms).responses.empty());
  const auto out = cycle_blocked(c, {{}, {}}, all_blocked(), t0 + 4s);
  ASSERT_EQ(names_of(out), (Names{"x", "barrier.0"}));
  EXPECT_EQ(out.responses[0].kind, te::OpKind::kAllgather);
  EXPECT_EQ(out.responses[1].kind, te::OpKind::kBarrier);
  const std::string expected =
      "deadlock: every rank has been blocked waiting for operations that cannot run for 3.0 s "
      "(THREELC_DEADLOCK_TIMEOUT): rank 0 waits for allgather of tensor 'x' (submitted by rank 0, "
      "not by "
      "rank 1); rank 1 waits for barrier (submitted by rank 1, not by rank 0)";
  for (const te::Response& r : out.responses) {
    EXPECT_EQ(r.type, te::ResponseType::kError);
    EXPECT_EQ(r.error_code, THREELC_EMISMATCH);
    EXPECT_TRUE(r.failed_ranks.empty());  // every rank that sent it
    EXPECT_EQ(r.error_message, expected);
  }
  // Forgotten: nothing more fails, and the next matching operation runs.
  EXPECT_TRUE(cycle_blocked(c, {{}, {}}, all_blocked(), t0 + 100s).responses.empty());
  const auto next =
      cycle_blocked(c, {{op_request("y")}, {op_request("y")}}, all_blocked(), t0 + 101s);
  ASSERT_EQ(names_of(next), (Names{"y"}));
  EXPECT_EQ(next.responses[0].type, te::ResponseType::kRun);
}

TEST(CoordinatorDeadlock, ARankThatIsNotBlockedPreventsIt) {
  te::Coordinator c(deadlock_options(2, 3s));
  cycle_blocked(c, {{op_request("a")}, {op_request("b")}}, all_blocked(), t0);
  for (int s = 1; s <= 100; ++s) {
    // Rank 1 is busy (computing, about to submit) in every cycle: no deadlock, however long.
    EXPECT_TRUE(cycle_blocked(c, {{}, {}}, {true, false}, t0 + s * 1s).responses.empty()) << s;
  }
  // One cycle in which rank 1 is not blocked restarts the clock.
  cycle_blocked(c, {{}, {}}, all_blocked(), t0 + 101s);
  cycle_blocked(c, {{}, {}}, {true, false}, t0 + 103s);
  EXPECT_TRUE(cycle_blocked(c, {{}, {}}, all_blocked(), t0 + 104s).responses.empty());
  EXPECT_TRUE(cycle_blocked(c, {{}, {}}, all_blocked(), t0 + 106s).responses.empty());
  EXPECT_EQ(names_of(cycle_blocked(c, {{}, {}}, all_blocked(), t0 + 107s)), (Names{"a", "b"}));
}

TEST(CoordinatorDeadlock, ProgressResetsTheClock) {
  te::Coordinator c(deadlock_options(2, 3s));
  cycle_blocked(c, {{op_request("a")}, {}}, all_blocked(), t0);
  cycle_blocked(c, {{}, {op_request("b")}}, all_blocked(), t0 + 2s);  // a submission: not stuck yet
  cycle_blocked(c, {{}, {}}, all_blocked(), t0 + 2500ms);             // stuck from here
  // Something runs: the clock starts again.
  const auto ran = cycle_blocked(c, {{op_request("c")}, {op_request("c")}}, all_blocked(), t0 + 5s);
  EXPECT_EQ(names_of(ran), (Names{"c"}));
  EXPECT_TRUE(cycle_blocked(c, {{}, {}}, all_blocked(), t0 + 6s).responses.empty());
  EXPECT_TRUE(cycle_blocked(c, {{}, {}}, all_blocked(), t0 + 8999ms).responses.empty());
  const auto out = cycle_blocked(c, {{}, {}}, all_blocked(), t0 + 9s);
  ASSERT_EQ(names_of(out), (Names{"a", "b"}));
  EXPECT_TRUE(contains(out.responses[0].error_message,
                       "rank 0 waits for allreduce of tensor 'a' (submitted by rank 0, not by "
                       "rank 1); rank 1 waits for allreduce of tensor 'b'"))
      << out.responses[0].error_message;
}

TEST(CoordinatorDeadlock, NothingPendingIsNoDeadlockAndZeroDisablesIt) {
  te::Coordinator idle(deadlock_options(2, 1s));
  for (int s = 0; s < 10; ++s) {
    EXPECT_TRUE(cycle_blocked(idle, {{}, {}}, all_blocked(), t0 + s * 1s).responses.empty());
  }
  te::Coordinator off(deadlock_options(2, Clock::duration::zero()));
  cycle_blocked(off, {{op_request("a")}, {}}, all_blocked(), t0);
  EXPECT_TRUE(cycle_blocked(off, {{}, {}}, all_blocked(), t0 + 1s).responses.empty());
  EXPECT_TRUE(cycle_blocked(off, {{}, {}}, all_blocked(), t0 + 100000s).responses.empty());
}

TEST(CoordinatorDeadlock, JoinedRanksNeedNotBeBlockedAndProcessSetsCountTheirMembers) {
  te::Coordinator c(deadlock_options(3, 2s));
  const te::OpRequest join = op_request(te::kJoinName, te::OpKind::kJoin, {});
  // Process set 1 = ranks 0, 1.
  const te::OpRequest add = [] {
    te::OpRequest r = op_request("add", te::OpKind::kAddProcessSet, {});
    r.members = {0, 1};
    return r;
  }();
  const auto added = cycle_blocked(c, {{add}, {add}, {add}}, {false, false, false}, t0);
  ASSERT_EQ(added.responses.size(), 1u);
  ASSERT_EQ(added.responses[0].assigned_set, 1);
  te::OpRequest in_set = op_request("s");
  in_set.process_set = 1;
  // Rank 2 joins (it need not be blocked, and it stands in for 'g'); rank 0 waits for 's' of
  // set 1, rank 1 for 'g' of the global set.
  cycle_blocked(c, {{in_set}, {op_request("g")}, {join}}, {true, true, false}, t0 + 1s);
  EXPECT_TRUE(cycle_blocked(c, {{}, {}, {}}, {true, true, false}, t0 + 2s).responses.empty());
  const auto out = cycle_blocked(c, {{}, {}, {}}, {true, true, false}, t0 + 4s);
  ASSERT_EQ(names_of(out), (Names{"s", "g"}));
  EXPECT_EQ(
      out.responses[0].error_message,
      "deadlock: every rank has been blocked waiting for operations that cannot run for "
      "2.0 s (THREELC_DEADLOCK_TIMEOUT): rank 0 waits for allreduce of tensor 's' (process set 1) "
      "(submitted by rank 0, not by rank 1); rank 1 waits for allreduce of tensor 'g' "
      "(submitted by rank 1, rank 2 joined, not by rank 0); rank 2 has joined");
  // The join waits on.
  const auto joined = cycle_blocked(c, {{join}, {join}, {}}, {true, true, false}, t0 + 5s);
  ASSERT_EQ(joined.responses.size(), 1u);
  EXPECT_EQ(joined.responses[0].kind, te::OpKind::kJoin);
}

}  // namespace
}  // namespace coordinator_test
