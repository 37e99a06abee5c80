// What the negotiation message tests share: requests and a response that exercise every kind,
// dtype, reduce op and field away from its default (so a field left out of the wire format
// cannot round-trip by accident), the comparison of responses, and serialized sizes.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <exception>
#include <limits>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "negotiation/messages.h"
#include "negotiation/response_cache.h"
#include "negotiation/wire.h"
#include "op_requests.h"
#include "runtime/operation.h"
#include "threelc/threelc.h"

namespace negotiation_test {

namespace te = threelc::engine;
using Bytes = std::vector<std::byte>;

using threelc::test_support::op_request;

// Requests exercising every kind, dtype and reduce op, and every other field with values away
// from their defaults (so a field left out of the wire format cannot round-trip by accident).
inline std::vector<te::OpRequest> varied_requests() {
  std::vector<te::OpRequest> out;
  const std::vector<std::vector<int64_t>> shapes = {{},        {0},          {7},
                                                    {3, 0, 2}, {2, 3, 4, 5}, {int64_t{1} << 40}};
  for (int k = 0; k < te::kOpKindCount; ++k) {
    for (int d = 0; d < te::kElementTypeCount; ++d) {
      te::OpRequest r;
      r.name = "t/" + std::to_string(k) + "/" + std::to_string(d);
      r.kind = static_cast<te::OpKind>(k);
      r.dtype = static_cast<te::ElementType>(d);
      r.shape = shapes[static_cast<size_t>(k + d) % shapes.size()];
      r.op = static_cast<te::ReduceOp>((k + d) % te::kReduceOpCount);
      r.prescale = 0.5 + k;
      r.postscale = -1.0 / (d + 3);
      r.compress = (k + d) % 2 == 1;
      r.sparsity = 0.125f * static_cast<float>(d + 1);
      r.root = k * 3 + d;
      r.splits = {static_cast<int64_t>(d), 0, static_cast<int64_t>(k) * 1000};
      r.device = d % 3 - 1;  // -1 (cpu), 0, 1
      r.process_set = (k + d) % 4;
      r.members = {0, static_cast<int32_t>(k + 1), static_cast<int32_t>(d + 20)};
      r.removed_set = k + 2 * d;
      out.push_back(r);
    }
  }
  te::OpRequest odd = op_request(std::string("odd\0name \xff\xfe", 11), te::OpKind::kAlltoall,
                                 {9, 2}, te::ElementType::kInt64);
  odd.splits = {2, 3, 4};
  odd.root = std::numeric_limits<int32_t>::max();
  odd.device = 7;
  out.push_back(odd);
  te::OpRequest empty_name = op_request("", te::OpKind::kBarrier);
  empty_name.shape.clear();
  out.push_back(empty_name);
  return out;
}

inline void expect_same(const te::Response& a, const te::Response& b, const std::string& where) {
  SCOPED_TRACE(where);
  EXPECT_EQ(a.type, b.type);
  EXPECT_EQ(a.kind, b.kind);
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    EXPECT_EQ(a.tensors[i], b.tensors[i]) << "tensor " << i << ": " << a.tensors[i].name;
  }
  EXPECT_EQ(a.per_rank, b.per_rank);
  EXPECT_EQ(a.joined_ranks, b.joined_ranks);
  EXPECT_EQ(a.error_code, b.error_code);
  EXPECT_EQ(a.error_message, b.error_message);
  EXPECT_EQ(a.last_joined_rank, b.last_joined_rank);
  EXPECT_EQ(a.failed_ranks, b.failed_ranks);
  EXPECT_EQ(a.assigned_set, b.assigned_set);
}

inline void expect_same(const te::CycleResponse& a, const te::CycleResponse& b) {
  EXPECT_EQ(a.shutdown, b.shutdown);
  EXPECT_EQ(a.shutdown_rank, b.shutdown_rank);
  EXPECT_EQ(a.abort, b.abort);
  ASSERT_EQ(a.responses.size(), b.responses.size());
  for (size_t i = 0; i < a.responses.size(); ++i) {
    expect_same(a.responses[i], b.responses[i], "response " + std::to_string(i));
  }
}

inline te::CycleResponse varied_response() {
  const auto requests = varied_requests();
  te::CycleResponse m;
  m.shutdown = true;
  m.shutdown_rank = 3;
  m.abort = "rank 2 closed the connection";
  te::Response fused;  // three allreduces fused
  fused.tensors = {op_request("a"), op_request("b", te::OpKind::kAllreduce, {2, 2}),
                   op_request("c", te::OpKind::kAllreduce, {})};
  fused.joined_ranks = {1, 3};
  m.responses.push_back(fused);
  te::Response gather;
  gather.kind = te::OpKind::kAllgather;
  gather.tensors = {op_request("g", te::OpKind::kAllgather, {5, 3}, te::ElementType::kInt8)};
  gather.per_rank = {5, 0, 2, int64_t{1} << 33};
  gather.joined_ranks = {1};
  m.responses.push_back(gather);
  te::Response all2all;
  all2all.kind = te::OpKind::kAlltoall;
  all2all.tensors = {requests.back()};
  all2all.per_rank = {0, 1, 2, 3, 4, 5, 6, 7, 8};
  m.responses.push_back(all2all);
  te::Response error;
  error.type = te::ResponseType::kError;
  error.kind = te::OpKind::kBroadcast;
  error.tensors = {op_request("w", te::OpKind::kBroadcast)};
  error.error_code = THREELC_EMISMATCH;
  error.error_message = "tensor 'w': ranks disagree on shape: ranks 0, 2 sent [4]; rank 1 sent [5]";
  error.failed_ranks = {1, 2};
  m.responses.push_back(error);
  te::Response added;
  added.kind = te::OpKind::kAddProcessSet;
  added.tensors = {op_request("add_process_set.noname.0", te::OpKind::kAddProcessSet, {})};
  added.tensors[0].members = {0, 2, 3};
  added.assigned_set = 4;
  m.responses.push_back(added);
  te::Response join;
  join.kind = te::OpKind::kJoin;
  join.tensors = {op_request("join", te::OpKind::kJoin, {})};
  join.last_joined_rank = 2;
  m.responses.push_back(join);
  te::Response empty_error;  // an error with no tensors and an empty message
  empty_error.type = te::ResponseType::kError;
  empty_error.error_code = THREELC_EINTERNAL;
  m.responses.push_back(empty_error);
  for (const auto& r : requests) {  // one response for every kind / dtype / op
    te::Response single;
    single.kind = r.kind;
    single.tensors = {r};
    m.responses.push_back(single);
  }
  return m;
}

inline size_t request_bytes(const te::OpRequest& r) {
  te::ByteWriter out;
  te::write_request(out, r);
  return out.bytes().size();
}

inline Bytes with_trailing(Bytes bytes) {
  bytes.push_back(std::byte{0});
  return bytes;
}

}  // namespace negotiation_test
