// The Coordinator (readiness, order, fusion, mismatches, join, shutdown, stall warnings).
// The stall timeout: coordinator_stall_timeout_test.cc; the consistency check and fusion on
// their own: consistency_test.cc, fusion_test.cc.
#include <gtest/gtest.h>

#include "coordinator_cycles.h"

namespace coordinator_test {
namespace {

TEST(Coordinator, ReadyOnlyWhenEveryRankSubmitted) {
  te::Coordinator c(options(3));
  EXPECT_TRUE(cycle(c, {{op_request("a")}, {op_request("a")}, {}}).responses.empty());
  EXPECT_TRUE(cycle(c, {{}, {}, {}}).responses.empty());
  const auto out = cycle(c, {{}, {}, {op_request("a")}});
  ASSERT_EQ(out.responses.size(), 1u);
  const te::Response& r = out.responses[0];
  EXPECT_EQ(r.type, te::ResponseType::kRun);
  EXPECT_EQ(r.kind, te::OpKind::kAllreduce);
  ASSERT_EQ(r.tensors.size(), 1u);
  EXPECT_EQ(r.tensors[0], op_request("a"));
  EXPECT_TRUE(r.joined_ranks.empty());
  EXPECT_FALSE(out.shutdown);
  EXPECT_EQ(out.shutdown_rank, -1);
  // It ran: it is not answered again, and the name may be submitted again.
  EXPECT_TRUE(cycle(c, {{}, {}, {}}).responses.empty());
  EXPECT_TRUE(cycle(c, {{op_request("a")}, {}, {}}).responses.empty());
  EXPECT_EQ(names_of(cycle(c, {{}, {op_request("a")}, {op_request("a")}})), (Names{"a"}));
}

TEST(Coordinator, OneRankJobRunsImmediately) {
  te::Coordinator c(options(1));
  EXPECT_EQ(names_of(cycle(c, {{op_request("a"), op_request("b")}})), (Names{"a", "b"}));
}

TEST(Coordinator, ReadyOrderIsFirstArrivalWhateverTheRanksListOrder) {
  // Rank 0 submits c then a; later b. Rank 1 lists them in every possible order in the last
  // cycle: the order stays c, a, b.
  std::vector<std::string> order = {"a", "b", "c"};
  do {
    SCOPED_TRACE(order[0] + order[1] + order[2]);
    te::Coordinator c(options(2));
    EXPECT_TRUE(cycle(c, {{op_request("c"), op_request("a")}, {}}).responses.empty());
    std::vector<te::OpRequest> rank1;
    rank1.reserve(order.size());
    for (const auto& name : order) rank1.push_back(op_request(name));
    EXPECT_EQ(names_of(cycle(c, {{op_request("b")}, rank1})), (Names{"c", "a", "b"}));
  } while (std::next_permutation(order.begin(), order.end()));
}

TEST(Coordinator, FirstArrivalAcrossRanksAndCycles) {
  te::Coordinator c(options(3));
  // "z" first reaches the coordinator from rank 2, "y" from rank 1 in the same cycle.
  EXPECT_TRUE(cycle(c, {{}, {op_request("y")}, {op_request("z")}}).responses.empty());
  EXPECT_TRUE(cycle(c, {{op_request("x")}, {}, {}}).responses.empty());
  EXPECT_EQ(names_of(cycle(c, {{op_request("z"), op_request("y")},
                               {op_request("x"), op_request("z")},
                               {op_request("x"), op_request("y")}})),
            (Names{"y", "z", "x"}));
}

TEST(Coordinator, ReadyAllreducesAreFused) {
  te::Coordinator c(options(2, 1 << 20));
  const auto out =
      cycle(c, {{op_request("a"), op_request("g", te::OpKind::kAllgather, {2}), op_request("b")},
                {op_request("b"), op_request("a"), op_request("g", te::OpKind::kAllgather, {3})}});
  EXPECT_EQ(names_of(out), (Names{"a+b", "g"}));
}

TEST(Coordinator, MismatchBecomesAnErrorNamingTheRanks) {
  te::Coordinator c(options(3, 1 << 20));
  const auto out = cycle(c, {{op_request("w", te::OpKind::kAllreduce, {4, 5}), op_request("ok")},
                             {op_request("w", te::OpKind::kAllreduce, {4, 6}), op_request("ok")},
                             {op_request("w", te::OpKind::kAllreduce, {4, 5}), op_request("ok")}});
  ASSERT_EQ(out.responses.size(), 2u);
  const te::Response& error = out.responses[0];
  EXPECT_EQ(error.type, te::ResponseType::kError);
  EXPECT_EQ(error.error_code, THREELC_EMISMATCH);
  ASSERT_EQ(error.tensors.size(), 1u);
  EXPECT_EQ(error.tensors[0].name, "w");
  EXPECT_TRUE(contains(error.error_message, "'w'")) << error.error_message;
  EXPECT_TRUE(contains(error.error_message, "ranks 0, 2 sent [4, 5]")) << error.error_message;
  EXPECT_TRUE(contains(error.error_message, "rank 1 sent [4, 6]")) << error.error_message;
  // The other tensor is unaffected.
  EXPECT_EQ(out.responses[1].type, te::ResponseType::kRun);
  EXPECT_EQ(names_of(out)[1], "ok");
  // The failed name is free again.
  EXPECT_NO_THROW(cycle(c, {{op_request("w")}, {}, {}}));
}

TEST(Coordinator, MismatchedKindsFail) {
  te::Coordinator c(options(2));
  const auto out = cycle(
      c, {{op_request("t", te::OpKind::kAllreduce)}, {op_request("t", te::OpKind::kBroadcast)}});
  ASSERT_EQ(out.responses.size(), 1u);
  EXPECT_EQ(out.responses[0].type, te::ResponseType::kError);
  EXPECT_EQ(out.responses[0].error_code, THREELC_EMISMATCH);
  EXPECT_TRUE(contains(out.responses[0].error_message, "operation"))
      << out.responses[0].error_message;
}

TEST(Coordinator, SubmittingAPendingNameTwiceIsAProtocolError) {
  te::Coordinator c(options(2));
  c.add(0, {op_request("a")}, false, t0);
  EXPECT_TRUE(c.respond(t0).responses.empty());
  EXPECT_THROW(c.add(0, {op_request("a")}, false, t0), te::NegotiationError);
  te::Coordinator d(options(2));
  EXPECT_THROW(d.add(1, {op_request("b"), op_request("b")}, false, t0), te::NegotiationError);
}

TEST(Coordinator, JoinedRankTakesPartInAllreducesWithoutData) {
  te::Coordinator c(options(3));
  const te::OpRequest join = op_request(te::kJoinName, te::OpKind::kJoin, {});
  // Ranks 0 and 1 submitted "a" before rank 2 joined: the join makes it ready.
  EXPECT_TRUE(cycle(c, {{op_request("a")}, {op_request("a")}, {}}).responses.empty());
  auto out = cycle(c, {{}, {}, {join}});
  ASSERT_EQ(out.responses.size(), 1u);
  EXPECT_EQ(out.responses[0].type, te::ResponseType::kRun);
  EXPECT_EQ(out.responses[0].tensors[0].name, "a");
  EXPECT_EQ(out.responses[0].joined_ranks, std::vector<int32_t>{2});
  // While the join is pending, allreduces of the others are ready without rank 2.
  out = cycle(c, {{op_request("b")}, {op_request("b")}, {}});
  ASSERT_EQ(names_of(out), (Names{"b"}));
  EXPECT_EQ(out.responses[0].type, te::ResponseType::kRun);
  EXPECT_EQ(out.responses[0].joined_ranks, std::vector<int32_t>{2});
  // But not without rank 1.
  EXPECT_TRUE(cycle(c, {{op_request("c")}, {}, {}}).responses.empty());
  out = cycle(c, {{}, {op_request("c")}, {}});
  EXPECT_EQ(names_of(out), (Names{"c"}));
  // A barrier runs without the joined rank too.
  out = cycle(c, {{op_request("bar", te::OpKind::kBarrier, {})},
                  {op_request("bar", te::OpKind::kBarrier, {})},
                  {}});
  ASSERT_EQ(names_of(out), (Names{"bar"}));
  EXPECT_EQ(out.responses[0].type, te::ResponseType::kRun);
}

TEST(Coordinator, AJoinedRankThatAlsoSubmittedCountsOnce) {
  te::Coordinator c(options(3));
  const te::OpRequest join = op_request(te::kJoinName, te::OpKind::kJoin, {});
  // Rank 2 submitted "x", then joined: "x" still waits for rank 1.
  EXPECT_TRUE(cycle(c, {{op_request("x")}, {}, {op_request("x")}}).responses.empty());
  EXPECT_TRUE(cycle(c, {{}, {}, {join}}).responses.empty());
  const auto out = cycle(c, {{}, {op_request("x")}, {}});
  ASSERT_EQ(names_of(out), (Names{"x"}));
  EXPECT_EQ(out.responses[0].type, te::ResponseType::kRun);
}

TEST(Coordinator, AllgatherWithAJoinedRankHasZeroRowsForIt) {
  te::Coordinator c(options(4));
  const te::OpRequest join = op_request(te::kJoinName, te::OpKind::kJoin, {});
  const auto out = cycle(c, {{op_request("g", te::OpKind::kAllgather, {3, 2})},
                             {join},
                             {op_request("g", te::OpKind::kAllgather, {0, 2})},
                             {op_request("g", te::OpKind::kAllgather, {5, 2})}});
  ASSERT_EQ(out.responses.size(), 1u);
  const te::Response& r = out.responses[0];
  EXPECT_EQ(r.type, te::ResponseType::kRun);
  EXPECT_EQ(r.kind, te::OpKind::kAllgather);
  EXPECT_EQ(r.per_rank, (std::vector<int64_t>{3, 0, 0, 5}));
  EXPECT_EQ(r.joined_ranks, std::vector<int32_t>{1});
}

TEST(Coordinator, AllgatherPerRankRowsWithoutJoin) {
  te::Coordinator c(options(3));
  const auto out = cycle(c, {{op_request("g", te::OpKind::kAllgather, {2, 7})},
                             {op_request("g", te::OpKind::kAllgather, {9, 7})},
                             {op_request("g", te::OpKind::kAllgather, {1, 7})}});
  ASSERT_EQ(out.responses.size(), 1u);
  EXPECT_EQ(out.responses[0].per_rank, (std::vector<int64_t>{2, 9, 1}));
  EXPECT_TRUE(out.responses[0].joined_ranks.empty());
}

TEST(Coordinator, BroadcastReducescatterAlltoallFailWhileARankHasJoined) {
  for (te::OpKind kind :
       {te::OpKind::kBroadcast, te::OpKind::kReducescatter, te::OpKind::kAlltoall}) {
    SCOPED_TRACE(te::op_kind_name(kind));
    te::Coordinator c(options(3));
    te::OpRequest t = op_request("t", kind, {6});
    t.splits = {2, 2, 2};
    const te::OpRequest join = op_request(te::kJoinName, te::OpKind::kJoin, {});
    const auto out = cycle(c, {{t}, {join}, {t}});
    ASSERT_EQ(out.responses.size(), 1u);
    const te::Response& r = out.responses[0];
    EXPECT_EQ(r.type, te::ResponseType::kError);
    EXPECT_EQ(r.kind, kind);
    EXPECT_EQ(r.error_code, THREELC_EJOINED);
    ASSERT_EQ(r.tensors.size(), 1u);
    EXPECT_EQ(r.tensors[0].name, "t");
    EXPECT_TRUE(contains(r.error_message, "'t'")) << r.error_message;
    EXPECT_TRUE(contains(r.error_message, "1")) << r.error_message;
  }
}

TEST(Coordinator, JoinCompletesWhenAllRanksJoinedWithTheLastJoiner) {
  te::Coordinator c(options(3));
  const te::OpRequest join = op_request(te::kJoinName, te::OpKind::kJoin, {});
  EXPECT_TRUE(cycle(c, {{}, {}, {join}}).responses.empty());
  EXPECT_TRUE(cycle(c, {{join}, {}, {}}).responses.empty());
  auto out = cycle(c, {{}, {join}, {}});
  ASSERT_EQ(out.responses.size(), 1u);
  const te::Response& r = out.responses[0];
  EXPECT_EQ(r.type, te::ResponseType::kRun);
  EXPECT_EQ(r.kind, te::OpKind::kJoin);
  EXPECT_EQ(r.last_joined_rank, 1);
  ASSERT_EQ(r.tensors.size(), 1u);
  EXPECT_EQ(r.tensors[0].name, te::kJoinName);
  // Afterwards no rank counts as joined: an allreduce needs everyone again.
  EXPECT_TRUE(cycle(c, {{op_request("a")}, {op_request("a")}, {}}).responses.empty());
  EXPECT_EQ(names_of(cycle(c, {{}, {}, {op_request("a")}})), (Names{"a"}));
  // A second round of joins reports its own last rank.
  EXPECT_TRUE(cycle(c, {{join}, {join}, {}}).responses.empty());
  out = cycle(c, {{}, {}, {join}});
  ASSERT_EQ(out.responses.size(), 1u);
  EXPECT_EQ(out.responses[0].last_joined_rank, 2);
}

TEST(Coordinator, JoinResponseComesAfterTheCycleTensors) {
  te::Coordinator c(options(2, 1 << 20));
  const te::OpRequest join = op_request(te::kJoinName, te::OpKind::kJoin, {});
  EXPECT_TRUE(cycle(c, {{op_request("a")}, {}}).responses.empty());
  const auto out = cycle(c, {{join}, {op_request("a"), join}});
  ASSERT_EQ(out.responses.size(), 2u);
  EXPECT_EQ(out.responses[0].tensors[0].name, "a");
  EXPECT_EQ(out.responses[1].kind, te::OpKind::kJoin);
  EXPECT_EQ(out.responses[1].last_joined_rank, 1);
}

// A user's tensor may be called "join": it is an allreduce like any other, not a join.
TEST(Coordinator, ATensorNamedJoinIsNotAJoin) {
  te::Coordinator c(options(2));
  const te::OpRequest user = op_request("join", te::OpKind::kAllreduce, {4});
  EXPECT_TRUE(cycle(c, {{user, op_request("a")}, {}}).responses.empty());
  // Rank 0 has not joined: "b" waits for it.
  EXPECT_TRUE(cycle(c, {{}, {op_request("b")}}).responses.empty());
  const auto out = cycle(c, {{op_request("b")}, {user, op_request("a")}});
  ASSERT_EQ(out.responses.size(), 3u);
  for (const auto& r : out.responses) {
    EXPECT_EQ(r.type, te::ResponseType::kRun);
    EXPECT_EQ(r.kind, te::OpKind::kAllreduce) << r.tensors[0].name;
    EXPECT_TRUE(r.joined_ranks.empty()) << r.tensors[0].name;
  }
  EXPECT_EQ(names_of(out), (Names{"join", "a", "b"}));
  // Next to a real join: rank 1 joins while rank 0 submits its tensor "join".
  const te::OpRequest join = op_request(te::kJoinName, te::OpKind::kJoin, {});
  const auto mixed = cycle(c, {{user}, {join}});
  ASSERT_EQ(mixed.responses.size(), 1u);
  EXPECT_EQ(mixed.responses[0].kind, te::OpKind::kAllreduce);
  EXPECT_EQ(mixed.responses[0].tensors[0], user);
  EXPECT_EQ(mixed.responses[0].joined_ranks, std::vector<int32_t>{1});
  const auto done = cycle(c, {{join}, {}});
  ASSERT_EQ(done.responses.size(), 1u);
  EXPECT_EQ(done.responses[0].kind, te::OpKind::kJoin);
  EXPECT_EQ(done.responses[0].last_joined_rank, 0);
}

TEST(Coordinator, AlltoallPerRankIsSenderMajor) {
  te::Coordinator c(options(3));
  std::vector<std::vector<te::OpRequest>> by_rank;
  const std::vector<std::vector<int64_t>> splits = {{1, 2, 3}, {4, 5, 6}, {7, 8, 9}};
  for (const auto& s : splits) {
    te::OpRequest r = op_request("x", te::OpKind::kAlltoall, {s[0] + s[1] + s[2], 2});
    r.splits = s;
    by_rank.push_back({r});
  }
  const auto out = cycle(c, by_rank);
  ASSERT_EQ(out.responses.size(), 1u);
  EXPECT_EQ(out.responses[0].type, te::ResponseType::kRun);
  EXPECT_EQ(out.responses[0].kind, te::OpKind::kAlltoall);
  EXPECT_EQ(out.responses[0].per_rank, (std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7, 8, 9}));
}

TEST(Coordinator, ShutdownNamesTheFirstRankThatAskedForIt) {
  te::Coordinator c(options(3));
  auto out = cycle(c, {{}, {}, {}});
  EXPECT_FALSE(out.shutdown);
  EXPECT_EQ(out.shutdown_rank, -1);
  c.add(0, {}, false, t0);
  c.add(1, {op_request("a")}, true, t0);
  c.add(2, {}, true, t0);
  out = c.respond(t0);
  EXPECT_TRUE(out.shutdown);
  EXPECT_EQ(out.shutdown_rank, 1);
  EXPECT_TRUE(out.responses.empty());
  // It stays set.
  c.add(0, {}, true, t0);
  out = c.respond(t0);
  EXPECT_TRUE(out.shutdown);
  EXPECT_EQ(out.shutdown_rank, 1);
}

TEST(Coordinator, ShutdownByRankZero) {
  te::Coordinator c(options(2));
  c.add(0, {}, true, t0);
  c.add(1, {}, false, t0);
  const auto out = c.respond(t0);
  EXPECT_TRUE(out.shutdown);
  EXPECT_EQ(out.shutdown_rank, 0);
}

TEST(Coordinator, ShutdownStillAnswersTheReadyTensors) {
  te::Coordinator c(options(2));
  c.add(0, {op_request("a")}, false, t0);
  c.add(1, {op_request("a")}, true, t0);
  const auto out = c.respond(t0);
  EXPECT_TRUE(out.shutdown);
  EXPECT_EQ(out.shutdown_rank, 1);
  EXPECT_EQ(names_of(out), (Names{"a"}));
}

TEST(Coordinator, StallWarningsNameTheMissingRanks) {
  te::Coordinator c(options(4, 0, 5s));
  c.add(0, {op_request("slow")}, false, t0);
  c.add(2, {op_request("slow")}, false, t0 + 1s);
  c.add(3, {op_request("slow"), op_request("done")}, false, t0 + 1s);
  EXPECT_TRUE(c.respond(t0).responses.empty());
  EXPECT_TRUE(c.stall_warnings(t0 + 4s).empty());
  const auto warnings = c.stall_warnings(t0 + 6s);
  ASSERT_EQ(warnings.size(), 2u);
  const std::string all = warnings[0] + "\n" + warnings[1];
  EXPECT_TRUE(contains(warnings[0], "'slow'")) << all;
  EXPECT_TRUE(contains(warnings[0], "rank 1 ")) << all;
  EXPECT_TRUE(contains(warnings[0], "ranks 0, 2-3")) << all;
  EXPECT_TRUE(contains(warnings[1], "'done'")) << all;
  EXPECT_TRUE(contains(warnings[1], "ranks 0-2 ")) << all;
  // Once a tensor runs it is no longer stalled.
  c.add(1, {op_request("slow")}, false, t0 + 20s);
  EXPECT_EQ(names_of(c.respond(t0 + 20s)), (Names{"slow"}));
  const auto later = c.stall_warnings(t0 + 30s);
  ASSERT_EQ(later.size(), 1u);
  EXPECT_TRUE(contains(later[0], "'done'")) << later[0];
}

TEST(Coordinator, TensorsRunWithAJoinedRankAreNotStalled) {
  te::Coordinator c(options(3, 0, 5s));
  const te::OpRequest join = op_request(te::kJoinName, te::OpKind::kJoin, {});
  c.add(0, {op_request("a")}, false, t0);
  c.add(1, {op_request("a")}, false, t0);
  c.add(2, {join}, false, t0);
  EXPECT_EQ(names_of(c.respond(t0)), (Names{"a"}));
  for (const std::string& warning : c.stall_warnings(t0 + 60s)) {
    EXPECT_FALSE(contains(warning, "'a'")) << warning;
  }
  // Neither are mismatched tensors, which fail at once.
  c.add(0, {op_request("m", te::OpKind::kAllreduce, {1})}, false, t0 + 61s);
  c.add(1, {op_request("m", te::OpKind::kAllreduce, {2})}, false, t0 + 61s);
  const auto out = c.respond(t0 + 61s);
  ASSERT_EQ(out.responses.size(), 1u);
  EXPECT_EQ(out.responses[0].type, te::ResponseType::kError);
  for (const std::string& warning : c.stall_warnings(t0 + 120s)) {
    EXPECT_FALSE(contains(warning, "'m'")) << warning;
  }
}

TEST(Coordinator, NoStallWarningsWhenDisabled) {
  te::Coordinator c(options(2, 0, Clock::duration::zero()));
  c.add(0, {op_request("a")}, false, t0);
  c.respond(t0);
  EXPECT_TRUE(c.stall_warnings(t0 + 1000s).empty());
}

}  // namespace
}  // namespace coordinator_test
