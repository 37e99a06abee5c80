// The error every collective of engine/src/collectives throws for what a peer sent.
//
// Every collective runs synchronously on the calling thread (the engine's background thread)
// over transport::Context. Errors: transport::Error passes through (it names the peer);
// CollectiveError for a message of the wrong length or a malformed block (it names the peer);
// std::invalid_argument for bad arguments. When a collective throws, every request it posted
// has completed or failed before it returns, so no buffer is freed under a transfer.
#pragma once

#include <string>

#include "engine_error.h"

namespace threelc::engine {

// A message that arrived with the wrong length or malformed (or a block that could not be
// encoded): names the peer (-1 for none).
class CollectiveError : public EngineError {
 public:
  CollectiveError(int peer, const std::string& message)
      : EngineError(THREELC_EPEER, message, peer) {}
};

}  // namespace threelc::engine
