// The coordinator's cross-rank consistency check (check_consistency, rank_list): which fields
// must agree, how a mismatch names the fields and the ranks.
#include <gtest/gtest.h>

#include "coordinator_cycles.h"

namespace coordinator_test {
namespace {

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

}  // namespace
}  // namespace coordinator_test
