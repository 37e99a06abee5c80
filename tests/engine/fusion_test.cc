// Tensor fusion of ready responses: what merges (same key, up to the threshold), what never does,
// and what keeps its place.
#include <gtest/gtest.h>

#include "coordinator_cycles.h"

namespace coordinator_test {
namespace {

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

}  // namespace
}  // namespace coordinator_test
