// The Coordinator with process sets: adding and removing sets (ids, duplicates, mismatches),
// readiness per set, one name in two sets, refusals of non-members and unknown sets, fusion
// within one set, allgather / alltoall in the set's terms, join, stall warnings and timeouts
// that name the set's missing members.
#include <gtest/gtest.h>

#include "coordinator_cycles.h"
#include "negotiation/process_sets.h"

namespace coordinator_test {
namespace {

te::OpRequest in_set(te::OpRequest r, int32_t set) {
  r.process_set = set;
  return r;
}

te::OpRequest add_request(const std::string& name, std::vector<int32_t> members) {
  te::OpRequest r = op_request(name, te::OpKind::kAddProcessSet, {});
  r.members = std::move(members);
  return r;
}

te::OpRequest remove_request(const std::string& name, int32_t id) {
  te::OpRequest r = op_request(name, te::OpKind::kRemoveProcessSet, {});
  r.removed_set = id;
  return r;
}

// Every rank of a job of `size` asks for a set of `members`; returns the new id.
int32_t add_set(te::Coordinator& c, int size, const std::vector<int32_t>& members,
                const std::string& name) {
  const auto out = cycle(c, std::vector<std::vector<te::OpRequest>>(static_cast<size_t>(size),
                                                                    {add_request(name, members)}));
  EXPECT_EQ(out.responses.size(), 1u);
  if (out.responses.size() != 1) return -1;
  EXPECT_EQ(out.responses[0].type, te::ResponseType::kRun) << out.responses[0].error_message;
  EXPECT_EQ(out.responses[0].kind, te::OpKind::kAddProcessSet);
  return out.responses[0].assigned_set;
}

TEST(CoordinatorProcessSets, AddedOnceEveryRankAskedWithIdsCountingUp) {
  te::Coordinator c(options(3));
  EXPECT_TRUE(cycle(c, {{add_request("add.0", {0, 2})}, {add_request("add.0", {0, 2})}, {}})
                  .responses.empty());
  auto out = cycle(c, {{}, {}, {add_request("add.0", {0, 2})}});
  ASSERT_EQ(out.responses.size(), 1u);
  EXPECT_EQ(out.responses[0].type, te::ResponseType::kRun);
  EXPECT_EQ(out.responses[0].kind, te::OpKind::kAddProcessSet);
  EXPECT_EQ(out.responses[0].assigned_set, 1);
  EXPECT_EQ(out.responses[0].tensors[0].members, (std::vector<int32_t>{0, 2}));
  EXPECT_EQ(c.process_sets().members(1), (std::vector<int32_t>{0, 2}));
  EXPECT_EQ(add_set(c, 3, {1}, "add.1"), 2);
  EXPECT_EQ(c.process_sets().ids(), (std::vector<int32_t>{0, 1, 2}));
}

TEST(CoordinatorProcessSets, ASetWithTheRanksOfAnotherIsRefusedNamingBoth) {
  te::Coordinator c(options(3));
  ASSERT_EQ(add_set(c, 3, {0, 2}, "add.0"), 1);
  for (const auto& [members, existing] : std::vector<std::pair<std::vector<int32_t>, std::string>>{
           {{0, 2}, "process set 1"}, {{0, 1, 2}, "process set 0"}}) {
    const te::OpRequest again = add_request("add.x", members);
    const auto out = cycle(c, {{again}, {again}, {again}});
    ASSERT_EQ(out.responses.size(), 1u);
    const te::Response& r = out.responses[0];
    EXPECT_EQ(r.type, te::ResponseType::kError);
    EXPECT_EQ(r.kind, te::OpKind::kAddProcessSet);
    EXPECT_EQ(r.error_code, THREELC_EINVAL);
    EXPECT_TRUE(r.failed_ranks.empty());  // on every rank
    EXPECT_TRUE(contains(r.error_message, te::members_text(members))) << r.error_message;
    EXPECT_TRUE(contains(r.error_message, existing + " has the same ranks")) << r.error_message;
  }
  EXPECT_EQ(c.process_sets().ids(), (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(add_set(c, 3, {2}, "add.2"), 2);  // the refusals took no id
}

TEST(CoordinatorProcessSets, RanksAskingForDifferentSetsFailWithAMismatch) {
  te::Coordinator c(options(3));
  const auto out = cycle(c, {{add_request("add.0", {0, 1})},
                             {add_request("add.0", {0, 1})},
                             {add_request("add.0", {1, 2})}});
  ASSERT_EQ(out.responses.size(), 1u);
  EXPECT_EQ(out.responses[0].type, te::ResponseType::kError);
  EXPECT_EQ(out.responses[0].error_code, THREELC_EMISMATCH);
  EXPECT_TRUE(contains(out.responses[0].error_message, "ranks 0-1 sent [0, 1]"))
      << out.responses[0].error_message;
  EXPECT_TRUE(contains(out.responses[0].error_message, "rank 2 sent [1, 2]"))
      << out.responses[0].error_message;
  EXPECT_EQ(c.process_sets().ids(), (std::vector<int32_t>{0}));
}

TEST(CoordinatorProcessSets, ATensorOfASetIsReadyOnceEveryMemberSubmittedIt) {
  te::Coordinator c(options(3));
  const int32_t set = add_set(c, 3, {0, 2}, "add.0");
  EXPECT_TRUE(cycle(c, {{in_set(op_request("x"), set)}, {}, {}}).responses.empty());
  const auto out = cycle(c, {{}, {}, {in_set(op_request("x"), set)}});  // rank 1 never does
  ASSERT_EQ(names_of(out), (Names{"x"}));
  EXPECT_EQ(out.responses[0].type, te::ResponseType::kRun);
  EXPECT_EQ(out.responses[0].tensors[0].process_set, set);
  EXPECT_TRUE(out.responses[0].joined_ranks.empty());
}

TEST(CoordinatorProcessSets, OneNameInTwoSetsAndTheGlobalSetIsThreeTensors) {
  te::Coordinator c(options(4));
  const int32_t low = add_set(c, 4, {0, 1}, "add.0");
  const int32_t high = add_set(c, 4, {2, 3}, "add.1");
  auto out = cycle(c, {{in_set(op_request("g"), low), op_request("g")},
                       {in_set(op_request("g"), low), op_request("g")},
                       {in_set(op_request("g"), high), op_request("g")},
                       {op_request("g")}});
  ASSERT_EQ(names_of(out), (Names{"g", "g"}));
  EXPECT_EQ(out.responses[0].tensors[0].process_set, low);
  EXPECT_EQ(out.responses[1].tensors[0].process_set, te::kGlobalProcessSet);
  out = cycle(c, {{}, {}, {}, {in_set(op_request("g"), high)}});
  ASSERT_EQ(names_of(out), (Names{"g"}));
  EXPECT_EQ(out.responses[0].tensors[0].process_set, high);
}

TEST(CoordinatorProcessSets, ANonMemberSubmissionFailsOnThatRankAlone) {
  te::Coordinator c(options(3));
  const int32_t set = add_set(c, 3, {0, 2}, "add.0");
  const te::OpRequest x = in_set(op_request("x"), set);
  auto out = cycle(c, {{x}, {x}, {}});
  ASSERT_EQ(out.responses.size(), 1u);
  const te::Response& refused = out.responses[0];
  EXPECT_EQ(refused.type, te::ResponseType::kError);
  EXPECT_EQ(refused.error_code, THREELC_EINVAL);
  EXPECT_EQ(refused.failed_ranks, std::vector<int32_t>{1});
  ASSERT_EQ(refused.tensors.size(), 1u);
  EXPECT_EQ(refused.tensors[0], x);
  EXPECT_EQ(refused.error_message,
            "allreduce of tensor 'x' (process set 1) on rank 1: rank 1 is not a member of "
            "process set 1 (ranks [0, 2])");
  // The members' tensor of that name is untouched and runs once rank 2 submits it.
  out = cycle(c, {{}, {}, {x}});
  ASSERT_EQ(names_of(out), (Names{"x"}));
  EXPECT_EQ(out.responses[0].type, te::ResponseType::kRun);
}

TEST(CoordinatorProcessSets, AnUnknownOrRemovedSetIsRefusedNamingIt) {
  te::Coordinator c(options(2));
  auto out = cycle(c, {{in_set(op_request("x"), 4)}, {}});
  ASSERT_EQ(out.responses.size(), 1u);
  EXPECT_EQ(out.responses[0].error_code, THREELC_EINVAL);
  EXPECT_EQ(out.responses[0].failed_ranks, std::vector<int32_t>{0});
  EXPECT_EQ(out.responses[0].error_message,
            "allreduce of tensor 'x' (process set 4) on rank 0: process set 4 does not exist");
  const int32_t set = add_set(c, 2, {1}, "add.0");
  const te::OpRequest removal = remove_request("remove.0", set);
  out = cycle(c, {{removal}, {removal}});
  ASSERT_EQ(out.responses.size(), 1u);
  EXPECT_EQ(out.responses[0].type, te::ResponseType::kRun);
  EXPECT_EQ(out.responses[0].kind, te::OpKind::kRemoveProcessSet);
  out = cycle(c, {{}, {in_set(op_request("y", te::OpKind::kBarrier, {}), set)}});
  ASSERT_EQ(out.responses.size(), 1u);
  EXPECT_EQ(out.responses[0].failed_ranks, std::vector<int32_t>{1});
  EXPECT_EQ(out.responses[0].error_message, "barrier on rank 1: process set 1 was removed");
}

TEST(CoordinatorProcessSets, ARemovalFailsTheSetsPendingTensorsFirstAndNoIdComesBack) {
  te::Coordinator c(options(3, 1 << 20));
  const int32_t set = add_set(c, 3, {0, 2}, "add.0");
  EXPECT_TRUE(cycle(c, {{in_set(op_request("x"), set), in_set(op_request("z"), set)},
                        {op_request("keep")},
                        {in_set(op_request("z"), set)}})
                  .responses.size() == 1u);  // z ran
  const te::OpRequest removal = remove_request("remove.0", set);
  const auto out = cycle(c, {{removal}, {removal}, {removal}});
  ASSERT_EQ(out.responses.size(), 2u);
  const te::Response& failed = out.responses[0];
  EXPECT_EQ(failed.type, te::ResponseType::kError);
  EXPECT_EQ(failed.error_code, THREELC_EINVAL);
  EXPECT_TRUE(failed.failed_ranks.empty());  // whoever sent it
  EXPECT_EQ(failed.tensors[0], in_set(op_request("x"), set));
  EXPECT_EQ(failed.error_message,
            "process set 1 was removed while allreduce of tensor 'x' (process set 1) was pending "
            "(submitted by rank 0)");
  EXPECT_EQ(out.responses[1].type, te::ResponseType::kRun);
  EXPECT_EQ(out.responses[1].kind, te::OpKind::kRemoveProcessSet);
  EXPECT_EQ(c.process_sets().ids(), (std::vector<int32_t>{0}));
  // The global set's pending tensor is untouched; the same ranks make a set with a new id.
  EXPECT_EQ(names_of(cycle(c, {{op_request("keep")}, {}, {op_request("keep")}})), (Names{"keep"}));
  EXPECT_EQ(add_set(c, 3, {0, 2}, "add.1"), 2);
}

TEST(CoordinatorProcessSets, TheGlobalSetAndUnknownSetsCannotBeRemoved) {
  te::Coordinator c(options(2));
  for (const auto& [id, message] : std::vector<std::pair<int32_t, std::string>>{
           {0, "remove_process_set: the global process set 0 cannot be removed"},
           {3, "remove_process_set: process set 3 does not exist"}}) {
    const te::OpRequest removal = remove_request("remove." + std::to_string(id), id);
    const auto out = cycle(c, {{removal}, {removal}});
    ASSERT_EQ(out.responses.size(), 1u);
    EXPECT_EQ(out.responses[0].type, te::ResponseType::kError);
    EXPECT_EQ(out.responses[0].error_code, THREELC_EINVAL);
    EXPECT_EQ(out.responses[0].error_message, message);
  }
}

TEST(CoordinatorProcessSets, FusionGroupsOnlyTensorsOfOneSet) {
  te::Coordinator c(options(3, 1 << 20));
  const int32_t set = add_set(c, 3, {0, 1}, "add.0");
  const te::OpRequest c1 = in_set(op_request("c"), set);
  const te::OpRequest d1 = in_set(op_request("d"), set);
  const auto out = cycle(c, {{op_request("a"), c1, op_request("b"), d1},
                             {op_request("a"), c1, op_request("b"), d1},
                             {op_request("a"), op_request("b")}});
  EXPECT_EQ(names_of(out), (Names{"a+b", "c+d"}));
  for (const te::OpRequest& t : out.responses[1].tensors) EXPECT_EQ(t.process_set, set);
}

TEST(CoordinatorProcessSets, AllgatherAndAlltoallFiguresAreInTheSetsTerms) {
  te::Coordinator c(options(4));
  const int32_t set = add_set(c, 4, {1, 3}, "add.0");
  te::OpRequest g1 = in_set(op_request("g", te::OpKind::kAllgather, {2, 3}), set);
  te::OpRequest g3 = in_set(op_request("g", te::OpKind::kAllgather, {5, 3}), set);
  te::OpRequest a1 = in_set(op_request("a", te::OpKind::kAlltoall, {3}), set);
  a1.splits = {1, 2};
  te::OpRequest a3 = in_set(op_request("a", te::OpKind::kAlltoall, {4}), set);
  a3.splits = {4, 0};
  const auto out = cycle(c, {{}, {g1, a1}, {}, {g3, a3}});
  ASSERT_EQ(names_of(out), (Names{"g", "a"}));
  EXPECT_EQ(out.responses[0].per_rank, (std::vector<int64_t>{2, 5}));
  EXPECT_EQ(out.responses[1].per_rank, (std::vector<int64_t>{1, 2, 4, 0}));
}

TEST(CoordinatorProcessSets, AJoinedRankStandsInForTheGlobalSetOnly) {
  te::Coordinator c(options(3));
  const int32_t set = add_set(c, 3, {0, 1}, "add.0");
  const te::OpRequest join = op_request(te::kJoinName, te::OpKind::kJoin, {});
  const auto out =
      cycle(c, {{in_set(op_request("x"), set), op_request("y")}, {join}, {op_request("y")}});
  ASSERT_EQ(names_of(out), (Names{"y"}));
  EXPECT_EQ(out.responses[0].joined_ranks, std::vector<int32_t>{1});
  // Nor does a joined rank stand in for an add or a removal: every rank must ask.
  EXPECT_TRUE(
      cycle(c, {{add_request("add.1", {2})}, {}, {add_request("add.1", {2})}}).responses.empty());
  EXPECT_EQ(names_of(cycle(c, {{}, {add_request("add.1", {2})}, {}})), (Names{"add.1"}));
}

TEST(CoordinatorProcessSets, StallWarningsNameTheSetsMissingMembers) {
  te::Coordinator c(options(3, 0, 1s));
  const int32_t set = add_set(c, 3, {0, 2}, "add.0");
  cycle(c, {{in_set(op_request("x"), set)}, {}, {}});
  const auto warnings = c.stall_warnings(t0 + 2s);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_TRUE(contains(warnings[0],
                       "tensor 'x' of process set 1 has waited 2.0 s for rank 2 "
                       "(submitted by rank 0)"))
      << warnings[0];
}

TEST(CoordinatorProcessSets, TheStallTimeoutNamesTheSetAndItsMissingMembers) {
  te::Coordinator::Options o = options(3);
  o.stall_timeout = 2s;
  te::Coordinator c(o);
  const int32_t set = add_set(c, 3, {0, 2}, "add.0");
  cycle(c, {{in_set(op_request("x"), set)}, {}, {in_set(op_request("w"), set)}});
  const auto out = cycle(c, {{}, {}, {}}, t0 + 2s);
  ASSERT_EQ(out.responses.size(), 2u);
  EXPECT_EQ(out.responses[0].error_code, THREELC_EMISMATCH);
  EXPECT_EQ(out.responses[0].error_message,
            "tensor 'x' (process set 1) was submitted by rank 0 but not by rank 2 within 2.0 s "
            "(THREELC_STALL_TIMEOUT); rank 2 has 'w' (process set 1) pending");
}

}  // namespace
}  // namespace coordinator_test
