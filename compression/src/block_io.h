// Internal: reading and writing the header and tile table at any alignment.
#pragma once

#include <cstring>

#include "threelc/compression/block_format.h"

namespace threelc::compression::detail {

inline BlockHeader read_header(const uint8_t* block) {
  BlockHeader header;
  std::memcpy(&header, block, sizeof header);
  return header;
}

inline void write_header(uint8_t* block, const BlockHeader& header) {
  std::memcpy(block, &header, sizeof header);
}

inline uint16_t read_tile_length(const uint8_t* table, size_t tile) {
  uint16_t length;
  std::memcpy(&length, table + tile * kTileLengthBytes, sizeof length);
  return length;
}

inline void write_tile_length(uint8_t* table, size_t tile, uint16_t length) {
  std::memcpy(table + tile * kTileLengthBytes, &length, sizeof length);
}

}  // namespace threelc::compression::detail
