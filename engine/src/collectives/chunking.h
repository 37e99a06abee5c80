// How the collectives that move plain bytes (broadcast, allgatherv, reducescatter, alltoallv)
// cut what they send into chunks. A chunk is what push_pull.cc's opening comment calls one: at
// most chunk_bytes of consecutive values (whole elements), cut from the start of the range it
// belongs to (a segment, a rank's part); each chunk travels as one message.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>

#include "collectives/collective_options.h"

namespace threelc::engine::detail {

// How many chunks of `chunk_bytes` cut `bytes` (the last one may be shorter).
inline size_t chunk_count(size_t bytes, size_t chunk_bytes) {
  return (bytes + chunk_bytes - 1) / chunk_bytes;
}

// The chunk length of `options` in bytes, a whole number of `element_bytes` elements; throws
// std::invalid_argument when it holds none.
inline size_t chunk_length(const CollectiveOptions& options, size_t element_bytes,
                           const char* collective) {
  const size_t chunk_bytes = options.chunk_bytes / element_bytes * element_bytes;
  if (chunk_bytes == 0) {
    throw std::invalid_argument(std::string(collective) + ": chunk_bytes " +
                                std::to_string(options.chunk_bytes) + " holds no element of " +
                                std::to_string(element_bytes) + " bytes");
  }
  return chunk_bytes;
}

}  // namespace threelc::engine::detail
