// Small helpers shared by the compression tests.
#pragma once

#include <bit>
#include <cstdint>
#include <vector>

namespace threelc::compression::test_support {

using Bytes = std::vector<uint8_t>;

inline uint32_t bits_of(float v) { return std::bit_cast<uint32_t>(v); }
inline float float_of(uint32_t b) { return std::bit_cast<float>(b); }

// Little-endian serialization, written out so that the tests do not share block_io.h.
inline void put_u8(Bytes& out, uint8_t v) { out.push_back(v); }
inline void put_u16(Bytes& out, uint16_t v) {
  out.push_back(static_cast<uint8_t>(v & 0xFF));
  out.push_back(static_cast<uint8_t>(v >> 8));
}
inline void put_u32(Bytes& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>((v >> (8 * i)) & 0xFF));
}

// One tile of a format v2 block: its scale (f32 bits) and its encoded bytes.
struct TiledTile {
  uint32_t scale_bits;
  Bytes bytes;
};

// A format v2 block from its header fields (G groups per tile, the header's scale), then the
// tiles: the u16 length table, the f32 scale table and the tile bytes back to back.
inline Bytes tiled_block(uint32_t n, uint16_t groups_per_tile, uint32_t scale_bits,
                         const std::vector<TiledTile>& tiles) {
  Bytes out;
  uint32_t payload = 0;
  for (const TiledTile& t : tiles) payload += static_cast<uint32_t>(t.bytes.size());
  put_u8(out, 2);  // format: 3LC v2
  put_u8(out, 0);  // flags
  put_u16(out, groups_per_tile);
  put_u32(out, n);
  put_u32(out, scale_bits);
  put_u32(out, payload);
  for (const TiledTile& t : tiles) put_u16(out, static_cast<uint16_t>(t.bytes.size()));
  for (const TiledTile& t : tiles) put_u32(out, t.scale_bits);
  for (const TiledTile& t : tiles) out.insert(out.end(), t.bytes.begin(), t.bytes.end());
  return out;
}

}  // namespace threelc::compression::test_support
