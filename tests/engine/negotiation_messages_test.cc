// Negotiation messages (CycleRequest / CycleResponse, docs/WIRE_FORMAT.md) on the wire: round
// trips of every field, the documented layout, cached tensors travelling as cache slots.
// Hostile bytes: negotiation_hostile_bytes_test.cc; the response cache: response_cache_test.cc.
#include <gtest/gtest.h>

#include "varied_messages.h"

namespace negotiation_test {
namespace {

TEST(NegotiationMessages, CycleRequestRoundTripsEveryField) {
  te::CycleRequest m;
  m.shutdown = true;
  m.blocked = true;
  m.cache_hits = {0, 5, 1, std::numeric_limits<uint32_t>::max()};
  m.requests = varied_requests();
  const Bytes bytes = te::serialize(m);
  const te::CycleRequest back = te::parse_cycle_request(bytes);
  EXPECT_TRUE(back.shutdown);
  EXPECT_TRUE(back.blocked);
  EXPECT_EQ(back.cache_hits, m.cache_hits);
  ASSERT_EQ(back.requests.size(), m.requests.size());
  for (size_t i = 0; i < m.requests.size(); ++i) {
    EXPECT_EQ(back.requests[i], m.requests[i]) << i << ": " << te::describe(m.requests[i]);
  }
  EXPECT_EQ(back.requests[0].shape, std::vector<int64_t>{});  // a scalar stays a scalar
  // Serializing the parsed message gives the same bytes.
  EXPECT_EQ(te::serialize(back), bytes);
}

TEST(NegotiationMessages, EmptyCycleRequestRoundTrips) {
  const te::CycleRequest m;
  const Bytes bytes = te::serialize(m);
  EXPECT_EQ(bytes.size(), 4u + 1u + 1u + 4u + 4u);
  const te::CycleRequest back = te::parse_cycle_request(bytes);
  EXPECT_FALSE(back.shutdown);
  EXPECT_FALSE(back.blocked);
  EXPECT_TRUE(back.cache_hits.empty());
  EXPECT_TRUE(back.requests.empty());
}

// The byte layout of docs/WIRE_FORMAT.md, written out by hand: a symmetric writer/reader pair
// could agree with each other and still not with the document.
TEST(NegotiationMessages, CycleRequestMatchesTheDocumentedLayout) {
  te::CycleRequest m;
  m.shutdown = true;
  m.blocked = true;
  m.cache_hits = {0x01020304};
  te::OpRequest r = op_request("ab", te::OpKind::kReducescatter, {3, 2}, te::ElementType::kFloat16);
  r.op = te::ReduceOp::kMax;
  r.prescale = 2.0;
  r.postscale = 0.5;
  r.compress = true;
  r.sparsity = 1.5f;
  r.root = 6;
  r.splits = {1};
  r.device = -1;
  r.process_set = 2;
  r.members = {1, 3};
  r.removed_set = 5;
  m.requests = {r};
  te::ByteWriter w;
  const auto u8 = [&](unsigned v) { w.u8(static_cast<uint8_t>(v)); };
  for (unsigned v : {0x51u, 0x45u, 0x52u, 0x33u}) u8(v);      // magic 0x33524551, little-endian
  u8(1);                                                      // shutdown
  u8(1);                                                      // blocked
  for (unsigned v : {1u, 0u, 0u, 0u, 4u, 3u, 2u, 1u}) u8(v);  // 1 hit: slot 0x01020304
  for (unsigned v : {1u, 0u, 0u, 0u}) u8(v);                  // 1 request
  for (unsigned v : {2u, 0u, 0u, 0u, 0x61u, 0x62u}) u8(v);    // name
  u8(3);                                                      // kind reducescatter
  u8(4);                                                      // dtype float16
  for (unsigned v : {2u, 0u, 0u, 0u}) u8(v);                  // shape: 2 dims
  for (unsigned v : {3u, 0u, 0u, 0u, 0u, 0u, 0u, 0u, 2u, 0u, 0u, 0u, 0u, 0u, 0u, 0u}) u8(v);
  u8(3);                                                                      // op max
  for (unsigned v : {0u, 0u, 0u, 0u, 0u, 0u, 0u, 0x40u}) u8(v);               // prescale 2.0
  for (unsigned v : {0u, 0u, 0u, 0u, 0u, 0u, 0xe0u, 0x3fu}) u8(v);            // postscale 0.5
  u8(1);                                                                      // compress
  for (unsigned v : {0u, 0u, 0xc0u, 0x3fu}) u8(v);                            // sparsity 1.5f
  for (unsigned v : {6u, 0u, 0u, 0u}) u8(v);                                  // root
  for (unsigned v : {1u, 0u, 0u, 0u, 1u, 0u, 0u, 0u, 0u, 0u, 0u, 0u}) u8(v);  // splits {1}
  for (unsigned v : {0xffu, 0xffu, 0xffu, 0xffu}) u8(v);                      // device -1
  for (unsigned v : {2u, 0u, 0u, 0u}) u8(v);                                  // process set 2
  for (unsigned v : {2u, 0u, 0u, 0u, 1u, 0u, 0u, 0u, 3u, 0u, 0u, 0u}) u8(v);  // members {1, 3}
  for (unsigned v : {5u, 0u, 0u, 0u}) u8(v);                                  // removed set 5
  EXPECT_EQ(te::serialize(m), w.bytes());
  const te::CycleRequest back = te::parse_cycle_request(w.bytes());
  ASSERT_EQ(back.requests.size(), 1u);
  EXPECT_EQ(back.requests[0], r);
}

TEST(NegotiationMessages, CycleResponseMatchesTheDocumentedLayout) {
  const te::ResponseCache cache(4);
  te::CycleResponse m;
  m.shutdown_rank = -1;
  te::Response r;
  r.type = te::ResponseType::kError;
  r.kind = te::OpKind::kAllgather;
  r.per_rank = {-2};
  r.joined_ranks = {5};
  r.error_code = THREELC_EJOINED;
  r.error_message = "x";
  r.last_joined_rank = 9;
  r.failed_ranks = {4};
  r.assigned_set = 7;
  m.responses = {r};
  te::ByteWriter w;
  const auto u8 = [&](unsigned v) { w.u8(static_cast<uint8_t>(v)); };
  for (unsigned v : {0x52u, 0x50u, 0x53u, 0x33u}) u8(v);  // magic 0x33535052
  u8(0);                                                  // shutdown
  for (unsigned v : {0xffu, 0xffu, 0xffu, 0xffu}) u8(v);  // shutdown rank -1
  for (unsigned v : {0u, 0u, 0u, 0u}) u8(v);              // abort: empty string
  for (unsigned v : {1u, 0u, 0u, 0u}) u8(v);              // 1 response
  u8(1);                                                  // type error
  u8(2);                                                  // kind allgather
  for (unsigned v : {0u, 0u, 0u, 0u}) u8(v);              // no tensors
  for (unsigned v : {1u, 0u, 0u, 0u, 0xfeu, 0xffu, 0xffu, 0xffu, 0xffu, 0xffu, 0xffu, 0xffu}) u8(v);
  for (unsigned v : {1u, 0u, 0u, 0u, 5u, 0u, 0u, 0u}) u8(v);  // joined {5}
  for (unsigned v : {0xf7u, 0xffu, 0xffu, 0xffu}) u8(v);      // THREELC_EJOINED (-9)
  for (unsigned v : {1u, 0u, 0u, 0u, 0x78u}) u8(v);           // message
  for (unsigned v : {9u, 0u, 0u, 0u}) u8(v);                  // last joined rank
  for (unsigned v : {1u, 0u, 0u, 0u, 4u, 0u, 0u, 0u}) u8(v);  // failed ranks {4}
  for (unsigned v : {7u, 0u, 0u, 0u}) u8(v);                  // assigned set 7
  EXPECT_EQ(te::serialize(m, cache), w.bytes());
  expect_same(te::parse_cycle_response(w.bytes(), cache), m);
}

TEST(NegotiationMessages, CycleResponseRoundTripsEveryField) {
  const te::ResponseCache empty(16);
  const te::CycleResponse m = varied_response();
  const Bytes bytes = te::serialize(m, empty);
  const te::CycleResponse back = te::parse_cycle_response(bytes, empty);
  expect_same(back, m);
  EXPECT_EQ(te::serialize(back, empty), bytes);
  // The defaults: no shutdown, rank -1, no responses.
  const te::CycleResponse none;
  const te::CycleResponse none_back = te::parse_cycle_response(te::serialize(none, empty), empty);
  expect_same(none_back, none);
  EXPECT_EQ(none_back.shutdown_rank, -1);
}

TEST(NegotiationMessages, CachedTensorsTravelAsSlots) {
  const te::OpRequest a = op_request("a", te::OpKind::kAllreduce, {64, 64});
  const te::OpRequest b = op_request("layer/2/bias", te::OpKind::kBroadcast);
  const te::OpRequest c = op_request("c", te::OpKind::kReducescatter, {8}, te::ElementType::kInt32);
  const te::OpRequest uncached = op_request("u");
  te::OpRequest a_changed = a;  // same name, different shape: not a cache hit
  a_changed.shape = {64, 65};

  te::ResponseCache cache(8);
  cache.use(a);
  cache.use(b);
  cache.use(c);
  te::CycleResponse m;
  te::Response fused;
  fused.tensors = {a, uncached, c};
  m.responses.push_back(fused);
  te::Response bcast;
  bcast.kind = te::OpKind::kBroadcast;
  bcast.tensors = {b};
  m.responses.push_back(bcast);
  te::Response changed;
  changed.tensors = {a_changed};
  m.responses.push_back(changed);
  te::Response error;  // error responses use slots too
  error.type = te::ResponseType::kError;
  error.error_code = THREELC_EMISMATCH;
  error.error_message = "mismatch";
  error.tensors = {c};
  m.responses.push_back(error);

  const te::ResponseCache empty(8);
  const Bytes full = te::serialize(m, empty);
  const Bytes slotted = te::serialize(m, cache);
  // Every cached tensor saves its request's bytes and costs a 4-byte slot instead.
  const size_t saved = (request_bytes(a) - 4) + (request_bytes(c) - 4) * 2 + (request_bytes(b) - 4);
  EXPECT_EQ(full.size() - slotted.size(), saved);

  const te::CycleResponse back = te::parse_cycle_response(slotted, cache);
  expect_same(back, m);
  // A cache fed the same updates resolves the slots identically.
  te::ResponseCache twin(8);
  twin.use(a);
  twin.use(b);
  twin.use(c);
  expect_same(te::parse_cycle_response(slotted, twin), m);
  // A cache whose slots hold other requests resolves them to those: slots, not names.
  te::ResponseCache other(8);
  other.use(c);
  other.use(b);
  other.use(a);
  const te::CycleResponse swapped = te::parse_cycle_response(slotted, other);
  ASSERT_EQ(swapped.responses[0].tensors.size(), 3u);
  EXPECT_EQ(swapped.responses[0].tensors[0], c);
  EXPECT_EQ(swapped.responses[0].tensors[1], uncached);
  EXPECT_EQ(swapped.responses[0].tensors[2], a);
  // Without the cache the slots are unknown.
  EXPECT_THROW(te::parse_cycle_response(slotted, empty), te::NegotiationError);
  // The full form parses with any cache.
  expect_same(te::parse_cycle_response(full, cache), m);
}

}  // namespace
}  // namespace negotiation_test
