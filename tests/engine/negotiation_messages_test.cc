// Negotiation messages (CycleRequest / CycleResponse, docs/WIRE_FORMAT.md) and the response
// cache: round trips of every field, cache slots on the wire, hostile bytes, LRU behaviour.
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

namespace {

namespace te = threelc::engine;
using Bytes = std::vector<std::byte>;

using threelc::test_support::op_request;

// Requests exercising every kind, dtype and reduce op, and every other field with values away
// from their defaults (so a field left out of the wire format cannot round-trip by accident).
std::vector<te::OpRequest> varied_requests() {
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

void expect_same(const te::Response& a, const te::Response& b, const std::string& where) {
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
}

void expect_same(const te::CycleResponse& a, const te::CycleResponse& b) {
  EXPECT_EQ(a.shutdown, b.shutdown);
  EXPECT_EQ(a.shutdown_rank, b.shutdown_rank);
  EXPECT_EQ(a.abort, b.abort);
  ASSERT_EQ(a.responses.size(), b.responses.size());
  for (size_t i = 0; i < a.responses.size(); ++i) {
    expect_same(a.responses[i], b.responses[i], "response " + std::to_string(i));
  }
}

te::CycleResponse varied_response() {
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
  m.responses.push_back(error);
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

size_t request_bytes(const te::OpRequest& r) {
  te::ByteWriter out;
  te::write_request(out, r);
  return out.bytes().size();
}

Bytes with_trailing(Bytes bytes) {
  bytes.push_back(std::byte{0});
  return bytes;
}

// --- requests on the wire -----------------------------------------------------------------

TEST(NegotiationMessages, CycleRequestRoundTripsEveryField) {
  te::CycleRequest m;
  m.shutdown = true;
  m.cache_hits = {0, 5, 1, std::numeric_limits<uint32_t>::max()};
  m.requests = varied_requests();
  const Bytes bytes = te::serialize(m);
  const te::CycleRequest back = te::parse_cycle_request(bytes);
  EXPECT_TRUE(back.shutdown);
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
  EXPECT_EQ(bytes.size(), 4u + 1u + 4u + 4u);
  const te::CycleRequest back = te::parse_cycle_request(bytes);
  EXPECT_FALSE(back.shutdown);
  EXPECT_TRUE(back.cache_hits.empty());
  EXPECT_TRUE(back.requests.empty());
}

// The byte layout of docs/WIRE_FORMAT.md, written out by hand: a symmetric writer/reader pair
// could agree with each other and still not with the document.
TEST(NegotiationMessages, CycleRequestMatchesTheDocumentedLayout) {
  te::CycleRequest m;
  m.shutdown = true;
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
  m.requests = {r};
  te::ByteWriter w;
  const auto u8 = [&](unsigned v) { w.u8(static_cast<uint8_t>(v)); };
  for (unsigned v : {0x51u, 0x45u, 0x52u, 0x33u}) u8(v);      // magic 0x33524551, little-endian
  u8(1);                                                      // shutdown
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

// --- hostile bytes ------------------------------------------------------------------------

void expect_rejected(std::span<const std::byte> bytes, const te::ResponseCache* cache,
                     const std::string& what) {
  SCOPED_TRACE(what);
  if (cache) {
    EXPECT_THROW(te::parse_cycle_response(bytes, *cache), te::NegotiationError);
  } else {
    EXPECT_THROW(te::parse_cycle_request(bytes), te::NegotiationError);
  }
}

TEST(NegotiationMessages, EveryTruncationIsRejected) {
  te::CycleRequest request;
  request.shutdown = true;
  request.cache_hits = {3, 1};
  request.requests = varied_requests();
  request.requests.resize(12);
  const Bytes request_bytes_ = te::serialize(request);
  for (size_t n = 0; n < request_bytes_.size(); ++n) {
    EXPECT_THROW(te::parse_cycle_request(std::span(request_bytes_).first(n)), te::NegotiationError)
        << "request cut to " << n << " of " << request_bytes_.size() << " bytes";
  }
  te::ResponseCache cache(4);
  cache.use(op_request("a"));
  te::CycleResponse response = varied_response();
  response.responses.resize(10);
  response.responses[0].tensors[0] = op_request("a");  // one slot
  const Bytes response_bytes = te::serialize(response, cache);
  for (size_t n = 0; n < response_bytes.size(); ++n) {
    EXPECT_THROW(te::parse_cycle_response(std::span(response_bytes).first(n), cache),
                 te::NegotiationError)
        << "response cut to " << n << " of " << response_bytes.size() << " bytes";
  }
}

// Hand-written hostile messages: a request message with one request whose fields can be
// replaced one by one.
struct RawRequest {
  uint32_t magic = 0x33524551;
  uint32_t hits = 0;
  uint32_t requests = 1;
  uint32_t name_length = 1;
  uint8_t kind = 0;
  uint8_t dtype = 6;
  uint32_t dims = 2;
  std::vector<int64_t> shape = {2, 3};
  uint8_t op = 0;
  uint32_t splits = 0;

  Bytes bytes() const {
    te::ByteWriter w;
    w.u32(magic);
    w.u8(0);
    w.u32(hits);
    for (uint32_t i = 0; i < hits && i < 4; ++i) w.u32(i);
    w.u32(requests);
    w.u32(name_length);
    w.u8('n');
    w.u8(kind);
    w.u8(dtype);
    w.u32(dims);
    for (int64_t d : shape) w.i64(d);
    w.u8(op);
    w.f64(1.0);
    w.f64(1.0);
    w.u8(0);
    w.f32(1.0f);
    w.u32(0);
    w.u32(splits);
    w.u32(0);
    return std::move(w.bytes());
  }
};

TEST(NegotiationMessages, HostileRequestsAreRejected) {
  ASSERT_NO_THROW(te::parse_cycle_request(RawRequest{}.bytes()));  // the template is valid
  const auto with = [](auto change) {
    RawRequest r;
    change(r);
    return r.bytes();
  };
  expect_rejected(with([](RawRequest& r) { r.magic = 0x33524552; }), nullptr, "bad magic");
  expect_rejected(with([](RawRequest& r) { r.magic = 0x33535052; }), nullptr, "response magic");
  expect_rejected(with([](RawRequest& r) { r.kind = 7; }), nullptr, "kind 7");
  expect_rejected(with([](RawRequest& r) { r.kind = 255; }), nullptr, "kind 255");
  expect_rejected(with([](RawRequest& r) { r.dtype = 8; }), nullptr, "dtype 8");
  expect_rejected(with([](RawRequest& r) { r.dtype = 200; }), nullptr, "dtype 200");
  expect_rejected(with([](RawRequest& r) { r.op = 5; }), nullptr, "op 5");
  expect_rejected(with([](RawRequest& r) { r.op = 128; }), nullptr, "op 128");
  expect_rejected(with([](RawRequest& r) { r.shape = {2, -3}; }), nullptr, "negative dim");
  expect_rejected(with([](RawRequest& r) { r.shape = {-1, 3}; }), nullptr, "dim -1");
  expect_rejected(with([](RawRequest& r) {
                    r.shape = {std::numeric_limits<int64_t>::min(), 1};
                  }),
                  nullptr, "most negative dim");
  expect_rejected(with([](RawRequest& r) { r.hits = 0xffffffff; }), nullptr, "huge hit count");
  expect_rejected(with([](RawRequest& r) { r.hits = 0x40000000; }), nullptr,
                  "hit count * 4 = 2^32");
  expect_rejected(with([](RawRequest& r) { r.requests = 0xffffffff; }), nullptr,
                  "huge request count");
  expect_rejected(with([](RawRequest& r) { r.requests = 2; }), nullptr, "one request missing");
  expect_rejected(with([](RawRequest& r) { r.name_length = 0xffffffff; }), nullptr,
                  "huge name length");
  expect_rejected(with([](RawRequest& r) { r.name_length = 1000; }), nullptr, "long name length");
  expect_rejected(with([](RawRequest& r) { r.dims = 0xffffffff; }), nullptr, "huge dim count");
  expect_rejected(with([](RawRequest& r) { r.dims = 0x20000000; }), nullptr,
                  "dim count * 8 = 2^32");
  expect_rejected(with([](RawRequest& r) { r.splits = 0xffffffff; }), nullptr, "huge split count");
  expect_rejected(with_trailing(RawRequest{}.bytes()), nullptr, "a trailing byte");
  Bytes two_requests = RawRequest{}.bytes();
  const Bytes second = RawRequest{}.bytes();
  two_requests.insert(two_requests.end(), second.begin() + 13, second.end());
  expect_rejected(two_requests, nullptr, "a whole extra request");
  expect_rejected(Bytes{}, nullptr, "nothing");
}

struct RawResponse {
  uint32_t magic = 0x33535052;
  uint32_t abort_length = 0;
  uint32_t responses = 1;
  uint8_t type = 0;
  uint8_t kind = 0;
  uint32_t tensors = 1;
  uint8_t flag = 1;
  uint32_t slot = 0;
  uint32_t per_rank = 2;
  uint32_t joined = 1;
  uint32_t message_length = 2;

  Bytes bytes() const {
    te::ByteWriter w;
    w.u32(magic);
    w.u8(0);
    w.u32(0);
    w.u32(abort_length);
    for (uint32_t i = 0; i < abort_length && i < 4; ++i) w.u8('!');
    w.u32(responses);
    w.u8(type);
    w.u8(kind);
    w.u32(tensors);
    w.u8(flag);
    if (flag == 0) {
      te::write_request(w, op_request("x"));
    } else {
      w.u32(slot);
    }
    w.u32(per_rank);
    w.i64(1);
    w.i64(2);
    w.u32(joined);
    w.u32(1);
    w.u32(0);
    w.u32(message_length);
    w.u8('o');
    w.u8('k');
    w.u32(0);
    return std::move(w.bytes());
  }
};

TEST(NegotiationMessages, HostileResponsesAreRejected) {
  te::ResponseCache cache(4);
  cache.use(op_request("s0"));
  cache.use(op_request("s1"));
  ASSERT_NO_THROW(te::parse_cycle_response(RawResponse{}.bytes(), cache));
  const auto with = [](auto change) {
    RawResponse r;
    change(r);
    return r.bytes();
  };
  expect_rejected(with([](RawResponse& r) { r.magic = 0x33524551; }), &cache, "request magic");
  expect_rejected(with([](RawResponse& r) { r.magic = 0; }), &cache, "zero magic");
  expect_rejected(with([](RawResponse& r) { r.type = 2; }), &cache, "type 2");
  expect_rejected(with([](RawResponse& r) { r.type = 255; }), &cache, "type 255");
  expect_rejected(with([](RawResponse& r) { r.kind = 7; }), &cache, "kind 7");
  expect_rejected(with([](RawResponse& r) { r.responses = 0xffffffff; }), &cache,
                  "huge response count");
  expect_rejected(with([](RawResponse& r) { r.responses = 2; }), &cache, "a response missing");
  expect_rejected(with([](RawResponse& r) { r.tensors = 0xffffffff; }), &cache,
                  "huge tensor count");
  expect_rejected(with([](RawResponse& r) { r.per_rank = 0xffffffff; }), &cache,
                  "huge per_rank count");
  expect_rejected(with([](RawResponse& r) { r.per_rank = 0x20000000; }), &cache,
                  "per_rank count * 8 = 2^32");
  expect_rejected(with([](RawResponse& r) { r.joined = 0xffffffff; }), &cache, "huge joined count");
  expect_rejected(with([](RawResponse& r) { r.joined = 0x40000000; }), &cache,
                  "joined count * 4 = 2^32");
  expect_rejected(with([](RawResponse& r) { r.message_length = 0xffffffff; }), &cache,
                  "huge message length");
  expect_rejected(with([](RawResponse& r) { r.abort_length = 0xffffffff; }), &cache,
                  "huge abort message length");
  expect_rejected(with([](RawResponse& r) { r.slot = 2; }), &cache, "empty cache slot");
  expect_rejected(with([](RawResponse& r) { r.slot = 4; }), &cache, "slot past the capacity");
  expect_rejected(with([](RawResponse& r) { r.slot = 0xffffffff; }), &cache, "slot 2^32-1");
  const te::ResponseCache no_cache(0);
  expect_rejected(RawResponse{}.bytes(), &no_cache, "slot 0 without a cache");
  expect_rejected(with_trailing(RawResponse{}.bytes()), &cache, "a trailing byte");
  expect_rejected(Bytes{}, &cache, "nothing");
  // A request inside a response is checked like one in a CycleRequest.
  Bytes inner = with([](RawResponse& r) { r.flag = 0; });
  ASSERT_NO_THROW(te::parse_cycle_response(inner, cache));
  // The request starts after magic, shutdown, shutdown rank, abort length (empty), response
  // count, type, kind, tensor count and flag (24 bytes); its kind follows the 4-byte name length
  // and the name "x".
  constexpr size_t kAt = 24;
  ASSERT_EQ(inner[kAt + 4], std::byte{'x'});
  ASSERT_EQ(inner[kAt + 5], std::byte{0});
  inner[kAt + 5] = std::byte{9};
  expect_rejected(inner, &cache, "bad kind inside a response's request");
  inner[kAt + 5] = std::byte{0};
  inner[kAt + 6] = std::byte{8};
  expect_rejected(inner, &cache, "bad dtype inside a response's request");
  inner[kAt + 6] = std::byte{6};
  ASSERT_EQ(inner[kAt + 7], std::byte{1});  // one dimension, 4 at kAt + 11
  ASSERT_EQ(inner[kAt + 11], std::byte{4});
  inner[kAt + 18] = std::byte{0x80};  // its top byte: negative
  expect_rejected(inner, &cache, "negative dimension inside a response's request");
  for (size_t i = 11; i < 19; ++i) inner[kAt + i] = std::byte{0xff};  // -1
  expect_rejected(inner, &cache, "dimension -1 inside a response's request");
}

// Random mutations of valid messages: each must parse or throw NegotiationError, never crash or
// throw anything else; what parses must be canonical after one more round trip.
TEST(NegotiationMessages, RandomMutationsParseOrThrowNegotiationError) {
  te::ResponseCache cache(6);
  for (const char* name : {"a", "b", "c"}) cache.use(op_request(name));
  std::vector<Bytes> requests;
  std::vector<Bytes> responses;
  {
    te::CycleRequest m;
    m.cache_hits = {0, 2};
    auto varied = varied_requests();
    m.requests.assign(varied.begin(), varied.begin() + 5);
    requests.push_back(te::serialize(m));
    m.shutdown = true;
    m.requests = {op_request("x", te::OpKind::kAlltoall, {3, 2}, te::ElementType::kInt8)};
    m.requests[0].splits = {1, 2};
    requests.push_back(te::serialize(m));
    te::CycleResponse r = varied_response();
    r.responses.resize(7);
    r.responses[0].tensors[1] = op_request("b");
    responses.push_back(te::serialize(r, cache));
    te::CycleResponse small;
    te::Response run;
    run.tensors = {op_request("a"), op_request("c")};
    small.responses = {run};
    responses.push_back(te::serialize(small, cache));
  }
  std::mt19937_64 rng(0x31c);
  const auto pick = [&](size_t n) {
    return static_cast<size_t>(std::uniform_int_distribution<size_t>(0, n - 1)(rng));
  };
  const std::byte interesting[] = {std::byte{0x00}, std::byte{0x01}, std::byte{0x02},
                                   std::byte{0x07}, std::byte{0x08}, std::byte{0x7f},
                                   std::byte{0x80}, std::byte{0xff}};
  size_t parsed = 0;
  size_t rejected = 0;
  for (int iteration = 0; iteration < 20000; ++iteration) {
    const bool is_response = iteration % 2 == 1;
    const auto& bases = is_response ? responses : requests;
    Bytes m = bases[pick(bases.size())];
    const size_t mutations = 1 + pick(4);
    for (size_t k = 0; k < mutations && !m.empty(); ++k) {
      const size_t at = pick(m.size());
      switch (pick(6)) {
        case 0:
          m[at] ^= static_cast<std::byte>(1u << pick(8));
          break;
        case 1:
          m[at] = interesting[pick(sizeof interesting)];
          break;
        case 2:
          m[at] = static_cast<std::byte>(pick(256));
          break;
        case 3:
          m.insert(m.begin() + static_cast<std::ptrdiff_t>(at), static_cast<std::byte>(pick(256)));
          break;
        case 4:
          m.erase(m.begin() + static_cast<std::ptrdiff_t>(at));
          break;
        default:
          m.resize(at);
          break;
      }
    }
    try {
      if (is_response) {
        const te::CycleResponse r = te::parse_cycle_response(m, cache);
        for (const auto& response : r.responses) {
          for (const auto& t : response.tensors) {
            for (int64_t d : t.shape) ASSERT_GE(d, 0) << "iteration " << iteration;
          }
        }
        const Bytes again = te::serialize(r, cache);
        ASSERT_EQ(te::serialize(te::parse_cycle_response(again, cache), cache), again)
            << "iteration " << iteration;
      } else {
        const te::CycleRequest r = te::parse_cycle_request(m);
        for (const auto& t : r.requests) {
          for (int64_t d : t.shape) ASSERT_GE(d, 0) << "iteration " << iteration;
        }
        const Bytes again = te::serialize(r);
        ASSERT_EQ(te::serialize(te::parse_cycle_request(again)), again)
            << "iteration " << iteration;
      }
      ++parsed;
    } catch (const te::NegotiationError&) {
      ++rejected;
    } catch (const std::exception& e) {
      FAIL() << "iteration " << iteration << ": unexpected exception " << e.what();
    }
  }
  // Both outcomes occur (the loop is not trivially rejecting or accepting everything).
  EXPECT_GT(parsed, 100u);
  EXPECT_GT(rejected, 1000u);
}

// --- response cache ------------------------------------------------------------------------

TEST(ResponseCache, EmptyCacheFindsNothing) {
  const te::ResponseCache cache(4);
  EXPECT_EQ(cache.size(), 0u);
  EXPECT_FALSE(cache.find(op_request("a")).has_value());
  EXPECT_THROW(cache.at(0), te::NegotiationError);
  EXPECT_THROW(cache.at(3), te::NegotiationError);
}

TEST(ResponseCache, FindsOnlyExactMatches) {
  te::ResponseCache cache(4);
  te::OpRequest a = op_request("a", te::OpKind::kAllreduce, {2, 3});
  a.compress = true;
  a.sparsity = 0.5f;
  cache.use(a);
  ASSERT_EQ(cache.find(a), std::optional<uint32_t>(0));
  EXPECT_EQ(cache.at(0), a);
  EXPECT_EQ(cache.size(), 1u);
  std::vector<std::pair<std::string, te::OpRequest>> variants;
  const auto variant = [&](const std::string& what, auto change) {
    te::OpRequest v = a;
    change(v);
    variants.emplace_back(what, v);
  };
  variant("name", [](te::OpRequest& v) { v.name = "b"; });
  variant("kind", [](te::OpRequest& v) { v.kind = te::OpKind::kBroadcast; });
  variant("dtype", [](te::OpRequest& v) { v.dtype = te::ElementType::kFloat16; });
  variant("shape", [](te::OpRequest& v) { v.shape = {3, 2}; });
  variant("rank of shape", [](te::OpRequest& v) { v.shape = {2, 3, 1}; });
  variant("op", [](te::OpRequest& v) { v.op = te::ReduceOp::kAverage; });
  variant("prescale", [](te::OpRequest& v) { v.prescale = 0.5; });
  variant("postscale", [](te::OpRequest& v) { v.postscale = 2.0; });
  variant("compress", [](te::OpRequest& v) { v.compress = false; });
  variant("sparsity", [](te::OpRequest& v) { v.sparsity = 0.25f; });
  variant("root", [](te::OpRequest& v) { v.root = 1; });
  variant("splits", [](te::OpRequest& v) { v.splits = {1}; });
  variant("device", [](te::OpRequest& v) { v.device = 0; });
  for (const auto& [what, v] : variants) {
    EXPECT_FALSE(cache.find(v).has_value()) << "differs in " << what;
  }
}

TEST(ResponseCache, UseRefreshesAndReplacesSameNameInPlace) {
  te::ResponseCache cache(3);
  const te::OpRequest a = op_request("a");
  const te::OpRequest b = op_request("b");
  const te::OpRequest c = op_request("c");
  cache.use(a);
  cache.use(b);
  cache.use(a);  // again: same slot, no new entry
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_EQ(cache.find(a), std::optional<uint32_t>(0));
  EXPECT_EQ(cache.find(b), std::optional<uint32_t>(1));
  te::OpRequest a2 = a;
  a2.shape = {9};
  cache.use(a2);  // the new request of that name takes the old one's slot
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_EQ(cache.find(a2), std::optional<uint32_t>(0));
  EXPECT_FALSE(cache.find(a).has_value());
  EXPECT_EQ(cache.at(0), a2);
  cache.use(c);
  EXPECT_EQ(cache.find(c), std::optional<uint32_t>(2));
  // Full: replacing a name in place evicts nothing.
  te::OpRequest b2 = b;
  b2.dtype = te::ElementType::kInt32;
  cache.use(b2);
  EXPECT_EQ(cache.size(), 3u);
  EXPECT_EQ(cache.find(b2), std::optional<uint32_t>(1));
  EXPECT_EQ(cache.find(a2), std::optional<uint32_t>(0));
  EXPECT_EQ(cache.find(c), std::optional<uint32_t>(2));
}

TEST(ResponseCache, EvictsTheLeastRecentlyUsedAtCapacity) {
  te::ResponseCache cache(3);
  const auto r = [](const char* name) { return op_request(name); };
  cache.use(r("a"));  // slot 0
  cache.use(r("b"));  // slot 1
  cache.use(r("c"));  // slot 2
  cache.use(r("a"));  // refreshed: b is now the least recently used
  cache.use(r("d"));
  EXPECT_EQ(cache.size(), 3u);
  EXPECT_FALSE(cache.find(r("b")).has_value());
  EXPECT_EQ(cache.find(r("d")), std::optional<uint32_t>(1));
  EXPECT_EQ(cache.find(r("a")), std::optional<uint32_t>(0));
  EXPECT_EQ(cache.find(r("c")), std::optional<uint32_t>(2));
  cache.use(r("e"));  // c (used third) is now the oldest
  EXPECT_FALSE(cache.find(r("c")).has_value());
  EXPECT_EQ(cache.find(r("e")), std::optional<uint32_t>(2));
  EXPECT_EQ(cache.at(2), r("e"));
  cache.use(r("b"));  // a is the oldest now
  EXPECT_EQ(cache.find(r("b")), std::optional<uint32_t>(0));
  EXPECT_FALSE(cache.find(r("a")).has_value());
  // A replaced-in-place entry counts as just used.
  te::OpRequest d2 = r("d");
  d2.shape = {1};
  cache.use(d2);      // slot 1, now the newest
  cache.use(r("f"));  // the oldest is e (slot 2)
  EXPECT_EQ(cache.find(r("f")), std::optional<uint32_t>(2));
  EXPECT_EQ(cache.find(d2), std::optional<uint32_t>(1));
}

TEST(ResponseCache, CapacityZeroCachesNothing) {
  te::ResponseCache cache(0);
  cache.use(op_request("a"));
  cache.use(op_request("a"));
  EXPECT_EQ(cache.size(), 0u);
  EXPECT_FALSE(cache.find(op_request("a")).has_value());
  EXPECT_THROW(cache.at(0), te::NegotiationError);
}

TEST(ResponseCache, OnlyAllreduceBroadcastAndReducescatterAreCached) {
  const std::vector<std::pair<te::OpKind, bool>> kinds = {
      {te::OpKind::kAllreduce, true},  {te::OpKind::kBroadcast, true},
      {te::OpKind::kAllgather, false}, {te::OpKind::kReducescatter, true},
      {te::OpKind::kAlltoall, false},  {te::OpKind::kBarrier, false},
      {te::OpKind::kJoin, false}};
  for (const auto& [kind, cacheable] : kinds) {
    SCOPED_TRACE(te::op_kind_name(kind));
    const te::OpRequest r = op_request("t", kind);
    EXPECT_EQ(te::ResponseCache::cacheable(r), cacheable);
    te::ResponseCache cache(4);
    cache.use(r);
    cache.use(r);
    EXPECT_EQ(cache.find(r).has_value(), cacheable);
    EXPECT_EQ(cache.size(), cacheable ? 1u : 0u);
  }
}

// A model of the documented policy (free slot, else the slot of the same name, else the least
// recently used) to compare the cache against, slot by slot.
class ModelCache {
 public:
  explicit ModelCache(size_t capacity) : capacity_(capacity) {}
  void use(const te::OpRequest& r) {
    if (capacity_ == 0 || !te::ResponseCache::cacheable(r)) return;
    ++clock_;
    for (auto& s : slots_) {
      if (s.request.name == r.name) {
        s = {r, clock_};
        return;
      }
    }
    if (slots_.size() < capacity_) {
      slots_.push_back({r, clock_});
      return;
    }
    size_t oldest = 0;
    for (size_t i = 1; i < slots_.size(); ++i) {
      if (slots_[i].used < slots_[oldest].used) oldest = i;
    }
    slots_[oldest] = {r, clock_};
  }
  std::optional<te::OpRequest> at(size_t slot) const {
    if (slot >= slots_.size()) return std::nullopt;
    return slots_[slot].request;
  }

 private:
  struct Slot {
    te::OpRequest request;
    uint64_t used;
  };
  size_t capacity_;
  uint64_t clock_ = 0;
  std::vector<Slot> slots_;
};

std::optional<te::OpRequest> slot_of(const te::ResponseCache& cache, uint32_t slot) {
  try {
    return cache.at(slot);
  } catch (const te::NegotiationError&) {
    return std::nullopt;
  }
}

TEST(ResponseCache, CachesFedTheSameUsesStayIdentical) {
  constexpr size_t kCapacity = 8;
  te::ResponseCache first(kCapacity);
  te::ResponseCache second(kCapacity);
  ModelCache model(kCapacity);
  std::mt19937 rng(12345);
  for (int step = 0; step < 3000; ++step) {
    const auto kind = static_cast<te::OpKind>(rng() % te::kOpKindCount);
    te::OpRequest r = op_request("t" + std::to_string(rng() % 20), kind);
    r.shape = {static_cast<int64_t>(rng() % 3)};  // the same name comes back changed
    first.use(r);
    second.use(r);
    model.use(r);
    ASSERT_EQ(first.size(), second.size()) << "step " << step;
    for (uint32_t slot = 0; slot <= kCapacity; ++slot) {
      const auto a = slot_of(first, slot);
      ASSERT_EQ(a, slot_of(second, slot)) << "step " << step << " slot " << slot;
      ASSERT_EQ(a, model.at(slot)) << "step " << step << " slot " << slot;
      if (a) {
        ASSERT_EQ(first.find(*a), std::optional<uint32_t>(slot));
      }
    }
  }
  EXPECT_EQ(first.size(), kCapacity);
}

}  // namespace
