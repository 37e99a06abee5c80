#include "negotiation/messages.h"

#include <utility>

#include "negotiation/response_cache.h"
#include "negotiation/wire.h"

namespace threelc::engine {

namespace {

constexpr uint32_t kRequestMagic = 0x33524551;   // "QER3"
constexpr uint32_t kResponseMagic = 0x33535052;  // "RPS3"

template <typename E>
E read_enum(ByteReader& in, int count, const char* what) {
  const uint8_t v = in.u8();
  if (v >= count) throw NegotiationError(std::string("negotiation message has a bad ") + what);
  return static_cast<E>(v);
}

void check_magic(ByteReader& in, uint32_t magic) {
  if (in.u32() != magic) throw NegotiationError("negotiation message has a bad magic number");
}

void check_end(const ByteReader& in) {
  if (!in.at_end()) throw NegotiationError("negotiation message has trailing bytes");
}

}  // namespace

Response error_response(const OpRequest& request, int code, std::string message) {
  Response r;
  r.type = ResponseType::kError;
  r.kind = request.kind;
  r.tensors = {request};
  r.error_code = code;
  r.error_message = std::move(message);
  return r;
}

void write_request(ByteWriter& out, const OpRequest& r) {
  out.str(r.name);
  out.u8(static_cast<uint8_t>(r.kind));
  out.u8(static_cast<uint8_t>(r.dtype));
  out.i64s(r.shape);
  out.u8(static_cast<uint8_t>(r.op));
  out.f64(r.prescale);
  out.f64(r.postscale);
  out.u8(r.compress ? 1 : 0);
  out.f32(r.sparsity);
  out.u32(static_cast<uint32_t>(r.root));
  out.i64s(r.splits);
  out.u32(static_cast<uint32_t>(r.device));
  out.u32(static_cast<uint32_t>(r.process_set));
  out.i32s(r.members);
  out.u32(static_cast<uint32_t>(r.removed_set));
}

OpRequest read_request(ByteReader& in) {
  OpRequest r;
  r.name = in.str();
  r.kind = read_enum<OpKind>(in, kOpKindCount, "operation kind");
  r.dtype = read_enum<ElementType>(in, kElementTypeCount, "dtype");
  r.shape = in.i64s();
  for (int64_t d : r.shape) {
    if (d < 0) throw NegotiationError("negotiation message has a negative dimension");
  }
  r.op = read_enum<ReduceOp>(in, kReduceOpCount, "reduce op");
  r.prescale = in.f64();
  r.postscale = in.f64();
  r.compress = in.u8() != 0;
  r.sparsity = in.f32();
  r.root = static_cast<int>(in.u32());
  r.splits = in.i64s();
  r.device = static_cast<int>(in.u32());
  r.process_set = static_cast<int32_t>(in.u32());
  if (r.process_set < 0) throw NegotiationError("negotiation message has a negative process set");
  r.members = in.i32s();
  r.removed_set = static_cast<int32_t>(in.u32());
  return r;
}

std::vector<std::byte> serialize(const CycleRequest& m) {
  ByteWriter out;
  out.u32(kRequestMagic);
  out.u8(m.shutdown ? 1 : 0);
  out.u8(m.blocked ? 1 : 0);
  out.u32(static_cast<uint32_t>(m.cache_hits.size()));
  for (uint32_t slot : m.cache_hits) out.u32(slot);
  out.u32(static_cast<uint32_t>(m.requests.size()));
  for (const auto& r : m.requests) write_request(out, r);
  return std::move(out.bytes());
}

CycleRequest parse_cycle_request(std::span<const std::byte> bytes) {
  ByteReader in(bytes);
  check_magic(in, kRequestMagic);
  CycleRequest m;
  m.shutdown = in.u8() != 0;
  m.blocked = in.u8() != 0;
  m.cache_hits.resize(in.count(4));
  for (auto& slot : m.cache_hits) slot = in.u32();
  const size_t n = in.count(1);
  for (size_t i = 0; i < n; ++i) m.requests.push_back(read_request(in));
  check_end(in);
  return m;
}

std::vector<std::byte> serialize(const CycleResponse& m, const ResponseCache& cache) {
  ByteWriter out;
  out.u32(kResponseMagic);
  out.u8(m.shutdown ? 1 : 0);
  out.u32(static_cast<uint32_t>(m.shutdown_rank));
  out.str(m.abort);
  out.u32(static_cast<uint32_t>(m.responses.size()));
  for (const Response& r : m.responses) {
    out.u8(static_cast<uint8_t>(r.type));
    out.u8(static_cast<uint8_t>(r.kind));
    out.u32(static_cast<uint32_t>(r.tensors.size()));
    for (const OpRequest& t : r.tensors) {
      if (auto slot = cache.find(t)) {
        out.u8(1);
        out.u32(*slot);
      } else {
        out.u8(0);
        write_request(out, t);
      }
    }
    out.i64s(r.per_rank);
    out.u32(static_cast<uint32_t>(r.joined_ranks.size()));
    for (int32_t j : r.joined_ranks) out.u32(static_cast<uint32_t>(j));
    out.u32(static_cast<uint32_t>(r.error_code));
    out.str(r.error_message);
    out.u32(static_cast<uint32_t>(r.last_joined_rank));
    out.i32s(r.failed_ranks);
    out.u32(static_cast<uint32_t>(r.assigned_set));
  }
  return std::move(out.bytes());
}

CycleResponse parse_cycle_response(std::span<const std::byte> bytes, const ResponseCache& cache) {
  ByteReader in(bytes);
  check_magic(in, kResponseMagic);
  CycleResponse m;
  m.shutdown = in.u8() != 0;
  m.shutdown_rank = static_cast<int32_t>(in.u32());
  m.abort = in.str();
  const size_t n = in.count(1);
  for (size_t i = 0; i < n; ++i) {
    Response r;
    r.type = read_enum<ResponseType>(in, 2, "response type");
    r.kind = read_enum<OpKind>(in, kOpKindCount, "operation kind");
    const size_t tensors = in.count(1);
    for (size_t t = 0; t < tensors; ++t) {
      r.tensors.push_back(in.u8() != 0 ? cache.at(in.u32()) : read_request(in));
    }
    r.per_rank = in.i64s();
    r.joined_ranks.resize(in.count(4));
    for (auto& j : r.joined_ranks) j = static_cast<int32_t>(in.u32());
    r.error_code = static_cast<int32_t>(in.u32());
    r.error_message = in.str();
    r.last_joined_rank = static_cast<int32_t>(in.u32());
    r.failed_ranks = in.i32s();
    r.assigned_set = static_cast<int32_t>(in.u32());
    m.responses.push_back(std::move(r));
  }
  check_end(in);
  return m;
}

}  // namespace threelc::engine
