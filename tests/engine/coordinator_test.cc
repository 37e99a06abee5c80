// The coordinator's decisions: the cross-rank consistency check, tensor fusion and the
// Coordinator itself (readiness, order, mismatches, join, shutdown, stall warnings).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "negotiation/consistency.h"
#include "negotiation/coordinator.h"
#include "negotiation/fusion.h"
#include "negotiation/messages.h"
#include "negotiation/wire.h"
#include "op_requests.h"
#include "runtime/operation.h"
#include "threelc/threelc.h"

namespace {

namespace te = threelc::engine;
using namespace std::chrono_literals;
using Clock = te::Coordinator::Clock;
using Requests = std::vector<std::optional<te::OpRequest>>;

constexpr Clock::time_point t0{};

using threelc::test_support::op_request;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// --- rank_list / check_consistency ------------------------------------------------------------

TEST(RankList, CompactsRuns) {
  EXPECT_EQ(te::rank_list({}), "");
  EXPECT_EQ(te::rank_list({3}), "3");
  EXPECT_EQ(te::rank_list({0, 1}), "0-1");
  EXPECT_EQ(te::rank_list({0, 1, 2}), "0-2");
  EXPECT_EQ(te::rank_list({0, 1, 2, 5}), "0-2, 5");
  EXPECT_EQ(te::rank_list({1, 3, 5}), "1, 3, 5");
  EXPECT_EQ(te::rank_list({0, 1, 3, 4, 7, 9, 10, 11}), "0-1, 3-4, 7, 9-11");
}

TEST(Consistency, AgreementIsNullopt) {
  EXPECT_EQ(te::check_consistency("w", {}), std::nullopt);
  EXPECT_EQ(te::check_consistency("w", {std::nullopt, std::nullopt}), std::nullopt);
  te::OpRequest r = op_request("w", te::OpKind::kAllreduce, {4, 5});
  r.compress = true;
  r.sparsity = 0.5f;
  r.prescale = 0.25;
  EXPECT_EQ(te::check_consistency("w", {r}), std::nullopt);
  EXPECT_EQ(te::check_consistency("w", {r, r, r, r}), std::nullopt);
  for (int k = 0; k < te::kOpKindCount; ++k) {
    const te::OpRequest same = op_request("w", static_cast<te::OpKind>(k));
    EXPECT_EQ(te::check_consistency("w", {same, same, same}), std::nullopt) << k;
  }
}

TEST(Consistency, ShapeMismatchNamesTheRanksGrouped) {
  const auto a = op_request("w", te::OpKind::kAllreduce, {4, 5});
  const auto b = op_request("w", te::OpKind::kAllreduce, {4, 6});
  EXPECT_EQ(te::check_consistency("w", {a, b, a}),
            "tensor 'w': ranks disagree on shape: ranks 0, 2 sent [4, 5]; rank 1 sent [4, 6]");
}

TEST(Consistency, RankRangesInTheMessage) {
  const auto f32 = op_request("x");
  const auto f16 = op_request("x", te::OpKind::kAllreduce, {4}, te::ElementType::kFloat16);
  const auto message = te::check_consistency("x", {f32, f32, f32, f16, f32, f16, f16});
  ASSERT_TRUE(message.has_value());
  EXPECT_TRUE(contains(*message, "tensor 'x'")) << *message;
  EXPECT_TRUE(contains(*message, "dtype")) << *message;
  EXPECT_TRUE(contains(*message, "ranks 0-2, 4 sent float32")) << *message;
  EXPECT_TRUE(contains(*message, "ranks 3, 5-6 sent float16")) << *message;
  EXPECT_FALSE(contains(*message, "shape")) << *message;
}

struct FieldCase {
  const char* field;  // expected in the message
  te::OpKind kind;
  void (*change)(te::OpRequest&);
  const char* changed_value;   // rank 1's value as printed
  const char* original_value;  // ranks 0 and 2's
};

TEST(Consistency, EachMismatchedFieldIsNamed) {
  const std::vector<FieldCase> cases = {
      {"dtype", te::OpKind::kAllreduce,
       [](te::OpRequest& r) { r.dtype = te::ElementType::kFloat64; }, "float64", "float32"},
      {"shape", te::OpKind::kBroadcast, [](te::OpRequest& r) { r.shape = {5}; }, "[5]", "[4]"},
      {"shape", te::OpKind::kAllreduce, [](te::OpRequest& r) { r.shape = {}; }, "[]", "[4]"},
      {"reduce op", te::OpKind::kAllreduce, [](te::OpRequest& r) { r.op = te::ReduceOp::kMax; },
       "max", "sum"},
      {"reduce op", te::OpKind::kReducescatter,
       [](te::OpRequest& r) { r.op = te::ReduceOp::kAverage; }, "average", "sum"},
      {"root rank", te::OpKind::kBroadcast, [](te::OpRequest& r) { r.root = 3; }, "3", "0"},
      {"compression", te::OpKind::kAllreduce, [](te::OpRequest& r) { r.compress = true; }, "3lc",
       "none"},
      // Printed as prescale/postscale.
      {"prescale", te::OpKind::kAllreduce, [](te::OpRequest& r) { r.prescale = 0.5; }, "0.5/1",
       "1/1"},
      {"postscale", te::OpKind::kReducescatter, [](te::OpRequest& r) { r.postscale = 2.0; }, "1/2",
       "1/1"},
      {"device", te::OpKind::kAllreduce, [](te::OpRequest& r) { r.device = 0; }, "cuda", "cpu"},
      {"operation", te::OpKind::kAllreduce,
       [](te::OpRequest& r) { r.kind = te::OpKind::kAllgather; }, "allgather", "allreduce"},
  };
  for (const FieldCase& c : cases) {
    SCOPED_TRACE(std::string(c.field) + " of " + te::op_kind_name(c.kind));
    const te::OpRequest same = op_request("t", c.kind);
    te::OpRequest other = same;
    c.change(other);
    const auto message = te::check_consistency("t", {same, other, same});
    ASSERT_TRUE(message.has_value());
    EXPECT_TRUE(contains(*message, c.field)) << *message;
    EXPECT_TRUE(contains(*message, std::string("rank 1 sent ") + c.changed_value)) << *message;
    EXPECT_TRUE(contains(*message, std::string("ranks 0, 2 sent ") + c.original_value)) << *message;
  }
}

// Each process drives its own GPU: CUDA tensors on different ordinals agree.
TEST(Consistency, CudaOrdinalsMayDifferBetweenRanks) {
  te::OpRequest a = op_request("g");
  a.device = 0;
  te::OpRequest b = a;
  b.device = 1;
  EXPECT_FALSE(te::check_consistency("g", {a, b, a}).has_value());
}

TEST(Consistency, SparsityIsPartOfCompression) {
  te::OpRequest a = op_request("s");
  a.compress = true;
  a.sparsity = 0.5f;
  te::OpRequest b = a;
  b.sparsity = 0.25f;
  const auto message = te::check_consistency("s", {a, b});
  ASSERT_TRUE(message.has_value());
  EXPECT_TRUE(contains(*message, "compression")) << *message;
  EXPECT_TRUE(contains(*message, "rank 0 sent 3lc s=0.5")) << *message;
  EXPECT_TRUE(contains(*message, "rank 1 sent 3lc s=0.25")) << *message;
}

// Values that differ only beyond the default 6 significant digits of an ostream still differ:
// ranks scaling by different factors would silently compute different results.
TEST(Consistency, NearlyEqualScalesAndSparsitiesStillDiffer) {
  te::OpRequest a = op_request("p");
  te::OpRequest b = a;
  b.prescale = std::nextafter(1.0, 2.0);
  EXPECT_TRUE(te::check_consistency("p", {a, b}).has_value()) << "prescale 1 vs 1 + 2^-52";
  b = a;
  b.postscale = 1.0000001;
  EXPECT_TRUE(te::check_consistency("p", {a, b}).has_value()) << "postscale 1 vs 1.0000001";
  a.compress = true;
  a.sparsity = 0.1f;
  b = a;
  b.sparsity = std::nextafter(0.1f, 1.0f);
  EXPECT_TRUE(te::check_consistency("p", {a, b}).has_value()) << "sparsity 0.1f vs next float";
}

TEST(Consistency, SeveralFieldsAreAllNamed) {
  const te::OpRequest a = op_request("m");
  te::OpRequest b = op_request("m", te::OpKind::kAllreduce, {8}, te::ElementType::kInt32);
  b.op = te::ReduceOp::kMin;
  const auto message = te::check_consistency("m", {a, b});
  ASSERT_TRUE(message.has_value());
  EXPECT_TRUE(contains(*message, "dtype")) << *message;
  EXPECT_TRUE(contains(*message, "shape")) << *message;
  EXPECT_TRUE(contains(*message, "reduce op")) << *message;
}

TEST(Consistency, DifferentOperationsReportOnlyTheOperation) {
  const te::OpRequest a = op_request("k", te::OpKind::kAllreduce, {4});
  const te::OpRequest b = op_request("k", te::OpKind::kBroadcast, {5}, te::ElementType::kInt8);
  const auto message = te::check_consistency("k", {a, b, a});
  ASSERT_TRUE(message.has_value());
  EXPECT_TRUE(contains(*message, "operation")) << *message;
  EXPECT_TRUE(contains(*message, "rank 1 sent broadcast")) << *message;
  EXPECT_TRUE(contains(*message, "ranks 0, 2 sent allreduce")) << *message;
  EXPECT_FALSE(contains(*message, "dtype")) << *message;
  EXPECT_FALSE(contains(*message, "shape")) << *message;
}

TEST(Consistency, AllgatherAndAlltoallMayDifferInTheFirstDimensionOnly) {
  for (te::OpKind kind : {te::OpKind::kAllgather, te::OpKind::kAlltoall}) {
    SCOPED_TRACE(te::op_kind_name(kind));
    te::OpRequest a = op_request("g", kind, {3, 4, 5});
    te::OpRequest b = op_request("g", kind, {0, 4, 5});
    te::OpRequest c = op_request("g", kind, {7, 4, 5});
    a.splits = {1, 2, 0};  // alltoall splits legitimately differ between ranks
    b.splits = {0, 0, 0};
    c.splits = {7, 0, 0};
    EXPECT_EQ(te::check_consistency("g", {a, b, c}), std::nullopt);
    te::OpRequest d = op_request("g", kind, {3, 4, 6});
    auto message = te::check_consistency("g", {a, d, c});
    ASSERT_TRUE(message.has_value());
    EXPECT_TRUE(contains(*message, "shape")) << *message;
    EXPECT_TRUE(contains(*message, "rank 1 sent")) << *message;
    EXPECT_TRUE(contains(*message, "ranks 0, 2 sent")) << *message;
    // A different number of dimensions is a mismatch even when the rest is empty.
    const te::OpRequest vector = op_request("g", kind, {3});
    const te::OpRequest scalar = op_request("g", kind, {});
    EXPECT_TRUE(te::check_consistency("g", {vector, scalar}).has_value());
    te::OpRequest e = op_request("g", kind, {3, 4});
    EXPECT_TRUE(te::check_consistency("g", {a, e}).has_value());
    // The dtype still has to agree.
    te::OpRequest f = b;
    f.dtype = te::ElementType::kInt64;
    EXPECT_TRUE(te::check_consistency("g", {a, f}).has_value());
  }
  // Every other kind compares the whole shape.
  for (te::OpKind kind :
       {te::OpKind::kAllreduce, te::OpKind::kBroadcast, te::OpKind::kReducescatter}) {
    SCOPED_TRACE(te::op_kind_name(kind));
    EXPECT_TRUE(
        te::check_consistency("g", {op_request("g", kind, {3, 4}), op_request("g", kind, {2, 4})})
            .has_value());
  }
}

TEST(Consistency, JoinedRanksAreIgnored) {
  const te::OpRequest a = op_request("j", te::OpKind::kAllreduce, {4});
  const te::OpRequest b = op_request("j", te::OpKind::kAllreduce, {5});
  EXPECT_EQ(te::check_consistency("j", {std::nullopt, a, std::nullopt, a}), std::nullopt);
  EXPECT_EQ(te::check_consistency("j", {a, std::nullopt}), std::nullopt);
  const auto message = te::check_consistency("j", {std::nullopt, a, b, std::nullopt, b});
  ASSERT_TRUE(message.has_value());
  EXPECT_TRUE(contains(*message, "rank 1 sent [4]")) << *message;
  EXPECT_TRUE(contains(*message, "ranks 2, 4 sent [5]")) << *message;
  EXPECT_FALSE(contains(*message, "0")) << *message;
}

// --- fusion -----------------------------------------------------------------------------------

te::Response single(const std::string& name, int64_t elements,
                    te::ElementType dtype = te::ElementType::kFloat32,
                    te::OpKind kind = te::OpKind::kAllreduce) {
  te::Response r;
  r.kind = kind;
  r.tensors = {op_request(name, kind, {elements}, dtype)};
  return r;
}

// The names of each response's tensors, "a+b" for a fused group.
std::vector<std::string> layout(const std::vector<te::Response>& responses) {
  std::vector<std::string> out;
  for (const auto& r : responses) {
    std::string names;
    for (const auto& t : r.tensors) names += (names.empty() ? "" : "+") + t.name;
    out.push_back(names);
  }
  return out;
}

using Names = std::vector<std::string>;

TEST(Fusion, FusedBytes) {
  EXPECT_EQ(te::fused_bytes(op_request("a", te::OpKind::kAllreduce, {10})), 40u);
  EXPECT_EQ(
      te::fused_bytes(op_request("a", te::OpKind::kAllreduce, {10}, te::ElementType::kFloat16)),
      20u);
  EXPECT_EQ(
      te::fused_bytes(op_request("a", te::OpKind::kAllreduce, {2, 5}, te::ElementType::kFloat64)),
      80u);
  EXPECT_EQ(te::fused_bytes(op_request("a", te::OpKind::kAllreduce, {}, te::ElementType::kFloat64)),
            8u);
  EXPECT_EQ(te::fused_bytes(op_request("a", te::OpKind::kAllreduce, {3, 0})), 0u);
  // Compressed tensors are fused as fp32, whatever their dtype.
  for (te::ElementType dtype : {te::ElementType::kFloat16, te::ElementType::kBFloat16,
                                te::ElementType::kFloat32, te::ElementType::kFloat64}) {
    te::OpRequest r = op_request("c", te::OpKind::kAllreduce, {2, 5}, dtype);
    r.compress = true;
    EXPECT_EQ(te::fused_bytes(r), 40u) << te::element_type_name(dtype);
  }
}

TEST(Fusion, SameKeyMergesUpToTheThreshold) {
  // 40 + 40 + 20 = 100: exactly at the threshold fits.
  EXPECT_EQ(layout(te::fuse({single("a", 10), single("b", 10), single("c", 5)}, 100)),
            (Names{"a+b+c"}));
  // 40 + 40 + 24 = 104: the third starts a new group.
  EXPECT_EQ(layout(te::fuse({single("a", 10), single("b", 10), single("c", 6)}, 100)),
            (Names{"a+b", "c"}));
  // A tensor of exactly the threshold fills its group.
  EXPECT_EQ(layout(te::fuse({single("a", 25), single("b", 1)}, 100)), (Names{"a", "b"}));
  EXPECT_EQ(layout(te::fuse({single("a", 1), single("b", 25)}, 100)), (Names{"a", "b"}));
  // Many small ones: groups of at most the threshold, in order.
  std::vector<te::Response> many;
  many.reserve(10);
  for (int i = 0; i < 10; ++i) many.push_back(single("t" + std::to_string(i), 10));
  EXPECT_EQ(layout(te::fuse(many, 120)), (Names{"t0+t1+t2", "t3+t4+t5", "t6+t7+t8", "t9"}));
}

TEST(Fusion, FusedResponsesKeepEverythingButTheTensorList) {
  te::Response a = single("a", 4);
  te::Response b = single("b", 4);
  a.joined_ranks = b.joined_ranks = {2};
  const auto out = te::fuse({a, b}, 1000);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].type, te::ResponseType::kRun);
  EXPECT_EQ(out[0].kind, te::OpKind::kAllreduce);
  EXPECT_EQ(out[0].joined_ranks, std::vector<int32_t>{2});
  ASSERT_EQ(out[0].tensors.size(), 2u);
  EXPECT_EQ(out[0].tensors[0], a.tensors[0]);
  EXPECT_EQ(out[0].tensors[1], b.tensors[0]);
}

TEST(Fusion, DifferentKeysNeverMerge) {
  struct Case {
    const char* what;
    void (*change)(te::OpRequest&);
  };
  const std::vector<Case> cases = {
      {"dtype", [](te::OpRequest& r) { r.dtype = te::ElementType::kInt32; }},
      {"op", [](te::OpRequest& r) { r.op = te::ReduceOp::kMax; }},
      {"compression", [](te::OpRequest& r) { r.compress = true; }},
      {"prescale", [](te::OpRequest& r) { r.prescale = 0.5; }},
      {"postscale", [](te::OpRequest& r) { r.postscale = 0.5; }},
      {"device", [](te::OpRequest& r) { r.device = 0; }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    te::Response other = single("b", 4);
    c.change(other.tensors[0]);
    EXPECT_EQ(layout(te::fuse({single("a", 4), other}, 1 << 20)), (Names{"a", "b"}));
    // Interleaved: each key forms its own group, where its first tensor was.
    te::Response other2 = single("d", 4);
    c.change(other2.tensors[0]);
    EXPECT_EQ(layout(te::fuse({single("a", 4), other, single("c", 4), other2}, 1 << 20)),
              (Names{"a+c", "b+d"}));
  }
  // Sparsity, between compressed tensors.
  te::Response a = single("a", 4);
  a.tensors[0].compress = true;
  a.tensors[0].sparsity = 0.5f;
  te::Response b = a;
  b.tensors[0].name = "b";
  b.tensors[0].sparsity = 0.75f;
  EXPECT_EQ(layout(te::fuse({a, b}, 1 << 20)), (Names{"a", "b"}));
}

TEST(Fusion, OtherResponsesKeepTheirPlace) {
  te::Response error = single("e", 4);
  error.type = te::ResponseType::kError;
  error.error_code = THREELC_EMISMATCH;
  error.error_message = "mismatch";
  const te::Response bcast = single("x", 4, te::ElementType::kFloat32, te::OpKind::kBroadcast);
  const te::Response gather = single("g", 4, te::ElementType::kFloat32, te::OpKind::kAllgather);
  te::Response barrier;
  barrier.kind = te::OpKind::kBarrier;
  barrier.tensors = {op_request("bar", te::OpKind::kBarrier, {})};
  const auto out =
      te::fuse({bcast, single("a", 4), error, single("b", 4), gather, barrier}, 1 << 20);
  EXPECT_EQ(layout(out), (Names{"x", "a+b", "e", "g", "bar"}));
  ASSERT_EQ(out.size(), 5u);
  EXPECT_EQ(out[2].type, te::ResponseType::kError);
  EXPECT_EQ(out[2].error_code, THREELC_EMISMATCH);
  EXPECT_EQ(out[2].error_message, "mismatch");
  EXPECT_EQ(out[0].kind, te::OpKind::kBroadcast);
  EXPECT_EQ(out[3].kind, te::OpKind::kAllgather);
  // An error response is never a fusion target either.
  EXPECT_EQ(layout(te::fuse({error, single("a", 4)}, 1 << 20)), (Names{"e", "a"}));
}

TEST(Fusion, ThresholdZeroDisablesFusion) {
  EXPECT_EQ(layout(te::fuse({single("a", 1), single("b", 1), single("c", 1)}, 0)),
            (Names{"a", "b", "c"}));
  EXPECT_TRUE(te::fuse({}, 0).empty());
  EXPECT_TRUE(te::fuse({}, 100).empty());
}

TEST(Fusion, ATensorLargerThanTheThresholdGoesAlone) {
  EXPECT_EQ(layout(te::fuse({single("big", 1000), single("a", 1), single("b", 1)}, 100)),
            (Names{"big", "a+b"}));
  EXPECT_EQ(layout(te::fuse({single("a", 1), single("b", 1), single("big", 1000)}, 100)),
            (Names{"a+b", "big"}));
  EXPECT_EQ(layout(te::fuse({single("big", 1000), single("big2", 26)}, 100)),
            (Names{"big", "big2"}));
}

TEST(Fusion, CompressedTensorsCountFourBytesPerElement) {
  // Two fp16 tensors of 10 elements: 20 bytes each uncompressed, 40 each compressed.
  const auto fp16 = [](const std::string& name, bool compress) {
    te::Response r = single(name, 10, te::ElementType::kFloat16);
    r.tensors[0].compress = compress;
    return r;
  };
  EXPECT_EQ(layout(te::fuse({fp16("a", false), fp16("b", false)}, 40)), (Names{"a+b"}));
  EXPECT_EQ(layout(te::fuse({fp16("a", true), fp16("b", true)}, 40)), (Names{"a", "b"}));
  EXPECT_EQ(layout(te::fuse({fp16("a", true), fp16("b", true)}, 80)), (Names{"a+b"}));
  // fp64 compressed: 8 bytes each raw, 4 each in the fp32 fusion buffer.
  const auto fp64 = [](const std::string& name) {
    te::Response r = single(name, 10, te::ElementType::kFloat64);
    r.tensors[0].compress = true;
    return r;
  };
  EXPECT_EQ(layout(te::fuse({fp64("a"), fp64("b")}, 80)), (Names{"a+b"}));
}

TEST(Fusion, MultiTensorResponsesAreLeftAlone) {
  te::Response pair = single("a", 1);
  pair.tensors.push_back(op_request("b", te::OpKind::kAllreduce, {1}));
  EXPECT_EQ(layout(te::fuse({pair, single("c", 1), single("d", 1)}, 1 << 20)),
            (Names{"a+b", "c+d"}));
}

// --- coordinator ------------------------------------------------------------------------------

te::Coordinator::Options options(int size, size_t fusion = 0,
                                 Clock::duration stall = Clock::duration::zero()) {
  te::Coordinator::Options o;
  o.size = size;
  o.fusion_threshold = fusion;
  o.stall_warning = stall;
  return o;
}

std::vector<std::string> names_of(const te::CycleResponse& m) { return layout(m.responses); }

// One cycle: every rank's submissions in rank order, then the response.
te::CycleResponse cycle(te::Coordinator& c, const std::vector<std::vector<te::OpRequest>>& by_rank,
                        Clock::time_point now = t0) {
  for (size_t rank = 0; rank < by_rank.size(); ++rank) {
    c.add(static_cast<int>(rank), by_rank[rank], false, now);
  }
  return c.respond(now);
}

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

// --- stall timeout ------------------------------------------------------------------------------

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
