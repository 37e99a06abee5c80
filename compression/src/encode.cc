// Block encoder: the two passes (block max, or v2's tile maxima; then quantize + pack +
// zero-run per tile), the raw fallback for non-finite input, and fp16/bf16 widening.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "block_io.h"
#include "kernels.h"
#include "threelc/compression/codec.h"
#include "widen.h"

namespace threelc::compression {
namespace {

using detail::Kernels;

constexpr uint32_t kNonFiniteBits = 0x7F800000u;

Status check_values(const Values& values, size_t out_size, size_t needed) {
  if (values.data == nullptr && values.count != 0) return Status::failure("values pointer is null");
  if (values.count > std::numeric_limits<uint32_t>::max()) {
    return Status::failure("block of " + std::to_string(values.count) +
                           " values exceeds the format's limit of 2^32-1");
  }
  if (out_size < needed) {
    return Status::failure("output buffer holds " + std::to_string(out_size) +
                           " bytes, a block of " + std::to_string(values.count) +
                           " values may need " + std::to_string(needed));
  }
  return Status::success();
}

// fp16/bf16 input is widened one tile at a time into this buffer.
float* tile_scratch() {
  thread_local float scratch[kTileValues];
  return scratch;
}

// Pointer to tile values as fp32: the input itself, or its widened copy.
const float* tile_input(const Values& values, size_t begin, size_t count) {
  if (values.dtype == DType::kFloat32) return static_cast<const float*>(values.data) + begin;
  detail::widen(values.dtype, values.data, begin, count, tile_scratch());
  return tile_scratch();
}

uint32_t block_abs_max_bits(const Kernels& kernels, const Values& values, const float* residual) {
  if (values.dtype == DType::kFloat32) {
    return kernels.abs_max_bits(static_cast<const float*>(values.data), residual, values.count);
  }
  uint32_t max_bits = 0;
  for (size_t begin = 0; begin < values.count; begin += kTileValues) {
    const size_t count = std::min(kTileValues, values.count - begin);
    const uint32_t bits = kernels.abs_max_bits(
        tile_input(values, begin, count), residual != nullptr ? residual + begin : nullptr, count);
    max_bits = std::max(max_bits, bits);
  }
  return max_bits;
}

void write_raw(const Values& values, uint8_t* out, EncodedBlock* result) {
  const size_t n = values.count;
  detail::write_header(
      out, BlockHeader{static_cast<uint8_t>(Format::kRaw), 0, 0, static_cast<uint32_t>(n), 0.0f,
                       static_cast<uint32_t>(4 * n)});
  uint8_t* payload = out + kHeaderBytes;
  for (size_t begin = 0; begin < n; begin += kTileValues) {
    const size_t count = std::min(kTileValues, n - begin);
    std::memcpy(payload + 4 * begin, tile_input(values, begin, count), 4 * count);
  }
  *result = EncodedBlock{raw_block_bytes(n), Format::kRaw, 0.0f};
}

}  // namespace

float max_abs(const Values& values, Isa isa) {
  if (values.count == 0 || values.data == nullptr) return 0.0f;
  // A pattern above 0x7F800000 is a NaN (with the sign cleared), so a NaN wins the max.
  return std::bit_cast<float>(block_abs_max_bits(detail::kernels_for(isa), values, nullptr));
}

Status encode_raw(const Values& values, std::span<uint8_t> out, EncodedBlock* result) {
  if (Status status = check_values(values, out.size(), raw_block_bytes(values.count));
      !status.ok()) {
    return status;
  }
  write_raw(values, out.data(), result);
  return Status::success();
}

bool scale_tile_valid(size_t scale_tile) {
  return scale_tile == 0 || (scale_tile % kTritsPerGroup == 0 && scale_tile <= kTileValues);
}

Status check_encode_options(const EncodeOptions& options) {
  if (!(options.sparsity >= 1.0f && options.sparsity < 2.0f)) {
    return Status::failure("sparsity multiplier " + std::to_string(options.sparsity) +
                           " is outside [1, 2)");
  }
  if (!scale_tile_valid(options.scale_tile)) {
    return Status::failure("scale tile of " + std::to_string(options.scale_tile) +
                           " values is not 0 or a multiple of 5 up to " +
                           std::to_string(kTileValues));
  }
  return Status::success();
}

Status encode(const Values& values, float* residual, const EncodeOptions& options,
              std::span<uint8_t> out, EncodedBlock* result) {
  if (Status status = check_encode_options(options); !status.ok()) return status;
  if (Status status = check_values(values, out.size(), max_block_bytes(values.count));
      !status.ok()) {
    return status;
  }
  const Kernels& kernels = detail::kernels_for(options.isa);
  const size_t n = values.count;
  // Format v2 (a scale per tile) when the block has more than one tile: a block of one tile is
  // quantized the same either way and v1 writes it 4 bytes shorter (so that a v2 block never
  // exceeds max_block_bytes: only a lone tile of one value would).
  const bool tiled = options.scale_tile != 0 && n > options.scale_tile;
  const size_t per_tile = tiled ? options.scale_tile : kTileValues;
  const size_t tiles = tile_count(n, per_tile);
  uint8_t* table = out.data() + kHeaderBytes;
  uint8_t* scales = table + tiles * kTileLengthBytes;  // v2 only
  uint8_t* payload = table + tile_table_bytes(tiles, tiled);

  // Pass 1: M = max |x + e| (v2: per tile, each tile's scale written to the table); a
  // non-finite value or scale sends the block raw.
  uint32_t max_bits = 0;
  if (!tiled) {
    max_bits = block_abs_max_bits(kernels, values, residual);
  } else {
    for (size_t t = 0; t < tiles && max_bits < kNonFiniteBits; ++t) {
      const size_t begin = t * per_tile;
      const size_t count = tile_values(n, t, per_tile);
      const uint32_t bits =
          kernels.abs_max_bits(tile_input(values, begin, count),
                               residual != nullptr ? residual + begin : nullptr, count);
      const float tile_scale = std::bit_cast<float>(bits) * options.sparsity;
      std::memcpy(scales + t * kTileScaleBytes, &tile_scale, sizeof tile_scale);
      max_bits = std::max(max_bits, bits);
    }
  }
  const float scale = std::bit_cast<float>(max_bits) * options.sparsity;
  if (max_bits >= kNonFiniteBits || !std::isfinite(scale)) {
    write_raw(values, out.data(), result);
    return Status::success();
  }

  // Pass 2: per tile, quantize (updating the residual), pack, zero-run encode.
  size_t payload_bytes = 0;
  alignas(64) uint8_t groups[kGroupsPerTile];
  for (size_t t = 0; t < tiles; ++t) {
    const size_t begin = t * per_tile;
    const size_t count = tile_values(n, t, per_tile);
    const size_t g = tile_groups(count);
    float tile_scale = scale;
    if (tiled) std::memcpy(&tile_scale, scales + t * kTileScaleBytes, sizeof tile_scale);
    kernels.quantize_tile(tile_input(values, begin, count),
                          residual != nullptr ? residual + begin : nullptr, count, g, tile_scale,
                          0.5f * tile_scale, groups);
    const size_t length = kernels.zero_run_encode(groups, g, payload + payload_bytes);
    detail::write_tile_length(table, t, static_cast<uint16_t>(length));
    payload_bytes += length;
  }
  const Format format = tiled ? Format::kThreeLCTiled : Format::kThreeLC;
  detail::write_header(
      out.data(),
      BlockHeader{static_cast<uint8_t>(format), 0,
                  static_cast<uint16_t>(tiled ? per_tile / kTritsPerGroup : 0),
                  static_cast<uint32_t>(n), scale, static_cast<uint32_t>(payload_bytes)});
  *result = EncodedBlock{static_cast<size_t>(payload - out.data()) + payload_bytes, format, scale};
  return Status::success();
}

}  // namespace threelc::compression
