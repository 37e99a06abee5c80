// All-to-all of byte parts of possibly different sizes.
#pragma once

#include <cstddef>
#include <span>

#include "collectives/collective_error.h"
#include "collectives/collective_options.h"
#include "threelc/transport/transport.h"

namespace threelc::engine {

// `input` is send_bytes[0] bytes for rank 0, then send_bytes[1] for rank 1, ...; `out` receives
// recv_bytes[p] bytes from every rank p, concatenated in rank order. What rank p sends here must
// be what this rank expects from it (send_bytes on p == recv_bytes here); the own part is
// copied locally (send_bytes[rank] == recv_bytes[rank]). Parts go straight to their rank in
// chunks of options.chunk_bytes on tag tag_base (the only tag used); zero-sized parts send
// nothing. `input` and `out` must not overlap. Events: send, receive, copy (tensor 0). Throws
// std::invalid_argument (sizes that do not match the spans or size(), overlap, chunk_bytes 0),
// CollectiveError (a chunk of the wrong length, naming the peer) or transport::Error.
void alltoallv(transport::Context& context, std::span<const std::byte> input,
               std::span<const size_t> send_bytes, std::span<std::byte> out,
               std::span<const size_t> recv_bytes, const CollectiveOptions& options = {});

}  // namespace threelc::engine
