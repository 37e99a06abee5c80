// Negotiation messages from hostile bytes: every truncation, hostile fields of requests and
// responses, and random mutations either parse or throw NegotiationError.
#include <gtest/gtest.h>

#include "varied_messages.h"

namespace negotiation_test {
namespace {

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
  uint32_t process_set = 0;
  uint32_t members = 2;

  Bytes bytes() const {
    te::ByteWriter w;
    w.u32(magic);
    w.u8(0);  // shutdown
    w.u8(0);  // blocked
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
    w.u32(process_set);
    w.u32(members);
    for (uint32_t i = 0; i < members && i < 2; ++i) w.u32(i);
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
  // The first value past the last OpKind.
  expect_rejected(with([](RawRequest& r) { r.kind = te::kOpKindCount; }), nullptr, "kind count");
  expect_rejected(with([](RawRequest& r) { r.kind = 255; }), nullptr, "kind 255");
  // The first value past the last threelc_dtype.
  expect_rejected(with([](RawRequest& r) { r.dtype = te::kElementTypeCount; }), nullptr,
                  "dtype count");
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
  expect_rejected(with([](RawRequest& r) { r.process_set = 0x80000000; }), nullptr,
                  "negative process set");
  expect_rejected(with([](RawRequest& r) { r.process_set = 0xffffffff; }), nullptr,
                  "process set -1");
  expect_rejected(with([](RawRequest& r) { r.members = 0xffffffff; }), nullptr,
                  "huge member count");
  expect_rejected(with([](RawRequest& r) { r.members = 0x40000000; }), nullptr,
                  "member count * 4 = 2^32");
  expect_rejected(with([](RawRequest& r) { r.members = 3; }), nullptr, "a member missing");
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
  uint32_t failed = 1;

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
    w.u32(failed);
    for (uint32_t i = 0; i < failed && i < 1; ++i) w.u32(2);
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
  expect_rejected(with([](RawResponse& r) { r.kind = te::kOpKindCount; }), &cache, "kind count");
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
  expect_rejected(with([](RawResponse& r) { r.failed = 0xffffffff; }), &cache,
                  "huge failed-rank count");
  expect_rejected(with([](RawResponse& r) { r.failed = 2; }), &cache, "a failed rank missing");
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
  inner[kAt + 5] = static_cast<std::byte>(te::kOpKindCount);
  expect_rejected(inner, &cache, "bad kind inside a response's request");
  inner[kAt + 5] = std::byte{0};
  inner[kAt + 6] = static_cast<std::byte>(te::kElementTypeCount);
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

}  // namespace
}  // namespace negotiation_test
