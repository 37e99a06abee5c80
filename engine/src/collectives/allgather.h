// Allgather of byte pieces of possibly different sizes, around the ring.
#pragma once

#include <cstddef>
#include <span>

#include "collectives/collective_error.h"
#include "collectives/collective_options.h"
#include "threelc/transport/transport.h"

namespace threelc::engine {

// `out` receives every rank's piece, concatenated in rank order; rank r's piece is `mine`, of
// bytes_per_rank[r] bytes (sizes may differ and may be 0; every rank passes the same sizes).
// Each piece travels the ring from its rank, r -> r + 1 -> ... -> r - 1, in chunks of
// options.chunk_bytes on tag tag_base (the only tag used); each rank receives it into place from
// its predecessor and forwards each chunk as soon as it has it, so every link carries every
// piece but one, once. `mine` may be out's own piece (in place) but must not overlap the rest.
// Events: send, receive, copy (tensor 0). Throws std::invalid_argument (sizes that do not match
// the spans or size(), overlap, chunk_bytes 0), CollectiveError (a chunk of the wrong length,
// naming the peer) or transport::Error.
void allgatherv(transport::Context& context, std::span<const std::byte> mine,
                std::span<std::byte> out, std::span<const size_t> bytes_per_rank,
                const CollectiveOptions& options = {});

}  // namespace threelc::engine
