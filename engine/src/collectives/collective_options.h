// What every collective of engine/src/collectives takes (collective_error.h: what they throw).
#pragma once

#include <cstddef>
#include <cstdint>

#include "collectives/observer.h"

namespace threelc::engine {

class Workspace;

struct CollectiveOptions {
  // Messages carry at most this many bytes (of native elements; for element-typed collectives
  // rounded down to whole elements), so that transfers pipeline: each message is one chunk
  // (chunking.h).
  size_t chunk_bytes = size_t{1} << 20;
  // First tag used on the data pairs; each collective documents the range it takes.
  uint32_t tag_base = 0x1000;
  CollectiveObserver* observer = nullptr;  // nullptr: nothing recorded
  // Where staging buffers come from; nullptr: allocated for the call. Only one collective may
  // use a workspace at a time.
  class Workspace* workspace = nullptr;
};

}  // namespace threelc::engine
