// The two messages of a negotiation cycle (docs/ARCHITECTURE.md, "Negotiation"): every rank
// sends the coordinator a CycleRequest; the coordinator answers every rank with the same
// CycleResponse, which all ranks then execute in order.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "negotiation/wire.h"
#include "runtime/operation.h"

namespace threelc::engine {

class ResponseCache;

struct CycleRequest {
  std::vector<uint32_t> cache_hits;  // slots of the response cache this rank submitted again
  std::vector<OpRequest> requests;   // the other operations it submitted since the last cycle
  bool shutdown = false;             // this rank called threelc_shutdown
  // A framework thread of this rank is blocked waiting for one of its operations (the
  // coordinator's deadlock detection: docs/ARCHITECTURE.md, "Negotiation").
  bool blocked = false;
};

enum class ResponseType : uint8_t { kRun = 0, kError = 1 };

struct Response {
  ResponseType type = ResponseType::kRun;
  OpKind kind = OpKind::kAllreduce;
  // The tensors, fused in this order (one unless kind is allreduce). Full requests after
  // parsing; on the wire a tensor in the response cache travels as its slot.
  std::vector<OpRequest> tensors;
  // In the terms of the tensors' process set (member i = its i-th rank, size = its size):
  // allgather: the first dimension of every member; alltoall: rows sent from member i to
  // member j at [i * size + j].
  std::vector<int64_t> per_rank;
  std::vector<int32_t> joined_ranks;  // ranks that have joined and take part with no data
                                      // (global set only)
  int32_t error_code = 0;             // kError: a THREELC_E* code
  std::string error_message;          // kError
  int32_t last_joined_rank = -1;      // join
  // kError: the ranks whose operation it fails (a submission refused for its process set);
  // empty: every rank that sent the tensor.
  std::vector<int32_t> failed_ranks;
  int32_t assigned_set = 0;  // kAddProcessSet: the id of the new set
};

// The kError response failing `request` with `code` (a THREELC_E* code) and `message` on every
// rank that sent it.
Response error_response(const OpRequest& request, int code, std::string message);

struct CycleResponse {
  std::vector<Response> responses;
  bool shutdown = false;  // every rank stops after executing these responses
  int32_t shutdown_rank = -1;
  // Not empty: rank 0 has stopped with this error (a peer died, a message was malformed);
  // every rank stops and fails its pending operations with it.
  std::string abort;
};

// A response's tensors that are in the cache travel as slots and are resolved through it; the
// cache is only read here.
std::vector<std::byte> serialize(const CycleRequest& message);
CycleRequest parse_cycle_request(std::span<const std::byte> bytes);
std::vector<std::byte> serialize(const CycleResponse& message, const ResponseCache& cache);
CycleResponse parse_cycle_response(std::span<const std::byte> bytes, const ResponseCache& cache);

void write_request(ByteWriter& out, const OpRequest& request);
OpRequest read_request(ByteReader& in);

}  // namespace threelc::engine
