// Broadcast: root's bytes to every rank, pipelined in chunks along the ring.
#pragma once

#include <cstddef>
#include <span>

#include "collectives/collective_error.h"
#include "collectives/collective_options.h"
#include "threelc/transport/transport.h"

namespace threelc::engine {

// Every rank ends with root's `data` (all ranks pass buffers of the same size). The bytes travel
// root -> root + 1 -> ... -> root - 1 in chunks of options.chunk_bytes on tag tag_base (the only
// tag used): each rank receives a chunk from its predecessor into place and forwards it at once,
// except the rank before root. Nothing is sent for an empty buffer or with one rank. Events:
// send, receive (tensor 0). Throws std::invalid_argument (root outside [0, size), chunk_bytes
// 0), CollectiveError (a chunk of the wrong length, naming the peer) or transport::Error.
void broadcast(transport::Context& context, std::span<std::byte> data, int root,
               const CollectiveOptions& options = {});

}  // namespace threelc::engine
