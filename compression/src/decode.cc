// Block validation and decoding. A block is checked completely (header, tile table, every
// tile's group count) before the first write to the destination.
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>

#include "block_io.h"
#include "kernels.h"
#include "threelc/compression/codec.h"

namespace threelc::compression {
namespace {

std::string str(size_t v) { return std::to_string(v); }

// A float as printf's %g does, so that a tiny or huge scale reads as what it is.
std::string float_str(float v) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", static_cast<double>(v));
  return text;
}

// Number of groups a tile's encoded bytes expand to.
// Every byte is at least one group; a run byte b adds b - 242 more. Written without a branch
// on the byte (literal and run bytes alternate unpredictably) so that it vectorizes.
size_t expanded_groups(const uint8_t* bytes, size_t length) {
  uint32_t extra = 0;  // a tile has at most 65535 bytes, so at most 65535 * 13 extra groups
  for (size_t p = 0; p < length; ++p) {
    const uint32_t b = bytes[p];
    extra += b >= kFirstRunByte ? b - (kFirstRunByte - 1u) : 0u;
  }
  return length + extra;
}

Status validate_raw(const BlockHeader& header, size_t size) {
  if (std::bit_cast<uint32_t>(header.scale) != 0) {
    return Status::failure("raw block has scale " + float_str(header.scale) + ", expected 0");
  }
  const size_t payload = 4 * static_cast<size_t>(header.count);
  if (header.payload_bytes != payload) {
    return Status::failure("raw block of " + str(header.count) + " values declares " +
                           str(header.payload_bytes) + " payload bytes, expected " + str(payload));
  }
  if (size != kHeaderBytes + payload) {
    return Status::failure("raw block of " + str(header.count) + " values is " + str(size) +
                           " bytes, expected " + str(kHeaderBytes + payload));
  }
  return Status::success();
}

bool is_tiled(const BlockHeader& header) {
  return header.format == static_cast<uint8_t>(Format::kThreeLCTiled);
}

// Values per tile: kTileValues in v1, 5 * G in v2 (G from the reserved field, checked first).
size_t values_per_tile(const BlockHeader& header) {
  return is_tiled(header) ? kTritsPerGroup * header.reserved : kTileValues;
}

bool scale_ok(float scale) { return std::isfinite(scale) && !std::signbit(scale); }

Status bad_scale(const std::string& what, float scale) {
  return Status::failure(what + " has scale " + float_str(scale) +
                         ", expected a finite non-negative value");
}

// Tile t's scale: the header's in v1, the table's in v2.
float tile_scale(const BlockHeader& header, const uint8_t* table, size_t tiles, size_t t) {
  if (!is_tiled(header)) return header.scale;
  float scale;
  std::memcpy(&scale, table + tiles * kTileLengthBytes + t * kTileScaleBytes, sizeof scale);
  return scale;
}

Status validate_threelc(const BlockHeader& header, std::span<const uint8_t> block) {
  if (!scale_ok(header.scale)) return bad_scale("3LC block", header.scale);
  const size_t n = header.count;
  const size_t per_tile = values_per_tile(header);
  const size_t tiles = tile_count(n, per_tile);
  const size_t table_end = kHeaderBytes + tile_table_bytes(tiles, is_tiled(header));
  if (block.size() < table_end) {
    return Status::failure("3LC block of " + str(n) + " values is " + str(block.size()) +
                           " bytes, too short for its " + str(tiles) + "-entry tile table");
  }
  if (block.size() != table_end + header.payload_bytes) {
    return Status::failure("3LC block declares " + str(header.payload_bytes) +
                           " payload bytes but carries " + str(block.size() - table_end));
  }
  const uint8_t* table = block.data() + kHeaderBytes;
  const uint8_t* tile_bytes = block.data() + table_end;
  size_t offset = 0;
  for (size_t t = 0; t < tiles; ++t) {
    if (const float scale = tile_scale(header, table, tiles, t); !scale_ok(scale)) {
      return bad_scale("tile " + str(t), scale);
    }
    const size_t length = detail::read_tile_length(table, t);
    if (offset + length > header.payload_bytes) {
      return Status::failure("tile " + str(t) + " of " + str(tiles) + " ends at payload byte " +
                             str(offset + length) + ", past the payload of " +
                             str(header.payload_bytes));
    }
    const size_t g = tile_groups(tile_values(n, t, per_tile));
    const size_t groups = expanded_groups(tile_bytes + offset, length);
    if (groups != g) {
      return Status::failure("tile " + str(t) + " expands to " + str(groups) +
                             " groups, expected " + str(g));
    }
    offset += length;
  }
  if (offset != header.payload_bytes) {
    return Status::failure("tile lengths sum to " + str(offset) + " bytes, header declares " +
                           str(header.payload_bytes));
  }
  return Status::success();
}

// Runs `per_tile(first value, count, g, groups, scale)` for every tile of a validated 3LC
// block (v1 or v2).
template <typename PerTile>
void for_each_tile(const detail::Kernels& kernels, std::span<const uint8_t> block,
                   PerTile&& per_tile) {
  const BlockHeader header = detail::read_header(block.data());
  const size_t n = header.count;
  const size_t tile_size = values_per_tile(header);
  const size_t tiles = tile_count(n, tile_size);
  const uint8_t* table = block.data() + kHeaderBytes;
  const uint8_t* bytes = table + tile_table_bytes(tiles, is_tiled(header));
  alignas(64) uint8_t groups[kGroupsPerTile];
  for (size_t t = 0; t < tiles; ++t) {
    const size_t length = detail::read_tile_length(table, t);
    const size_t count = tile_values(n, t, tile_size);
    const size_t g = tile_groups(count);
    kernels.zero_run_expand(bytes, length, g, groups);
    per_tile(t * tile_size, count, g, groups, tile_scale(header, table, tiles, t));
    bytes += length;
  }
}

}  // namespace

Status validate(std::span<const uint8_t> block, size_t expected_count, BlockInfo* info) {
  if (block.size() < kHeaderBytes) {
    return Status::failure("block is " + str(block.size()) + " bytes, shorter than the " +
                           str(kHeaderBytes) + "-byte header");
  }
  const BlockHeader header = detail::read_header(block.data());
  if (header.format > static_cast<uint8_t>(Format::kThreeLCTiled)) {
    return Status::failure("block format " + str(header.format) +
                           " is unknown (0 raw fp32, 1 3LC v1, 2 3LC v2)");
  }
  if (header.flags != 0)
    return Status::failure("block flags are " + str(header.flags) + ", expected 0");
  if (is_tiled(header)) {
    if (header.reserved == 0 || header.reserved > kGroupsPerTile) {
      return Status::failure("3LC v2 block has " + str(header.reserved) +
                             " groups per tile, expected 1 to " + str(kGroupsPerTile));
    }
  } else if (header.reserved != 0) {
    return Status::failure("block reserved field is " + str(header.reserved) + ", expected 0");
  }
  if (expected_count != kAnyCount && header.count != expected_count) {
    return Status::failure("block holds " + str(header.count) + " values, receiver expects " +
                           str(expected_count));
  }
  Status status = header.format == static_cast<uint8_t>(Format::kRaw)
                      ? validate_raw(header, block.size())
                      : validate_threelc(header, block);
  if (!status.ok()) return status;
  if (info != nullptr) {
    *info = BlockInfo{static_cast<Format>(header.format), header.count, header.scale,
                      header.payload_bytes, values_per_tile(header)};
  }
  return Status::success();
}

Status decode(std::span<const uint8_t> block, size_t expected_count, float* dst,
              const DecodeOptions& options) {
  BlockInfo info;
  if (Status status = validate(block, expected_count, &info); !status.ok()) return status;
  if (info.count != 0 && dst == nullptr) return Status::failure("destination pointer is null");
  if (info.format == Format::kRaw) {
    if (info.count != 0) std::memcpy(dst, block.data() + kHeaderBytes, 4 * size_t{info.count});
    return Status::success();
  }
  const detail::Kernels& kernels = detail::kernels_for(options.isa);
  for_each_tile(kernels, block,
                [&](size_t begin, size_t count, size_t g, const uint8_t* groups, float scale) {
                  kernels.unpack_tile(groups, count, g, scale, dst + begin);
                });
  return Status::success();
}

Status decode_add(std::span<const uint8_t> block, size_t expected_count, float alpha, float* dst,
                  const DecodeOptions& options) {
  BlockInfo info;
  if (Status status = validate(block, expected_count, &info); !status.ok()) return status;
  if (info.count != 0 && dst == nullptr) return Status::failure("destination pointer is null");
  const detail::Kernels& kernels = detail::kernels_for(options.isa);
  if (info.format == Format::kRaw) {
    kernels.raw_add(block.data() + kHeaderBytes, info.count, alpha, dst);
    return Status::success();
  }
  for_each_tile(kernels, block,
                [&](size_t begin, size_t count, size_t g, const uint8_t* groups, float scale) {
                  kernels.unpack_tile_add(groups, count, g, alpha * scale, dst + begin);
                });
  return Status::success();
}

}  // namespace threelc::compression
