// Internal: launchers of the CUDA codec's kernels (encode_kernels.cu, decode_kernels.cu). Each
// queues its kernel on `stream` and returns the launch error; the caller (cuda_codec.cu) owns
// buffers, ordering and the block layout around them.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "block_layout.h"
#include "threelc/compression/codec.h"

namespace threelc::compression::cuda::detail {

inline constexpr int kTileThreads = 256;  // threads per CUDA block in the per-tile kernels
inline constexpr int kGroupsPerThread = static_cast<int>(kGroupsPerTile) / kTileThreads;  // 16
static_assert(kGroupsPerThread * kTileThreads == static_cast<int>(kGroupsPerTile));

// Device state of one encode, in the workspace.
struct EncodeBuffers {
  uint32_t* max_bits;      // 1: max over i of the bits of |x[i] + e[i]|
  uint32_t* tile_lengths;  // tiles: encoded bytes of each tile
  uint32_t* tile_offsets;  // tiles: exclusive scan of tile_lengths
  float* tile_scales;      // tiles: v2's scale of each tile (unused in v1)
  uint8_t* tile_bytes;     // tiles * G: tile t's bytes at t * layout.groups_per_tile()
};

// Pass 1: *max_bits = max(*max_bits, bits of |x + e|) over n values (the caller zeroes it).
cudaError_t launch_abs_max(const void* x, DType dtype, const float* e, size_t n, uint32_t* max_bits,
                           cudaStream_t stream);

// Pass 2: quantizes every tile of `layout` (updating e unless null), packs groups and zero-run
// encodes them into buffers.tile_bytes / tile_lengths. A tile's scale is the block's from
// *max_bits and `sparsity` (v1), or its own max |x + e| times `sparsity`, which v2 also writes
// to buffers.tile_scales. Does nothing (all lengths 0, e untouched) when the block's scale is not
// finite.
cudaError_t launch_quantize_tiles(const void* x, DType dtype, float* e, const BlockLayout& layout,
                                  float sparsity, const EncodeBuffers& buffers,
                                  cudaStream_t stream);

// After tile_offsets is scanned: writes the header, tile table (v2: lengths, then scales) and
// compacted tile bytes to `block` (3LC), or, for a non-finite block scale, a raw header and,
// when `raw_values`, the widened values after it (`block` then holds raw_block_bytes(n) and is
// 4-byte aligned).
cudaError_t launch_write_block(const void* x, DType dtype, const BlockLayout& layout,
                               float sparsity, const EncodeBuffers& buffers, bool raw_values,
                               uint8_t* block, cudaStream_t stream);

// tile_lengths[t] = the u16 tile table entry t of a 3LC block in device memory.
cudaError_t launch_read_tile_table(const uint8_t* block, size_t tiles, uint32_t* tile_lengths,
                                   cudaStream_t stream);

// Decodes the tiles of a validated 3LC block of `layout`, each with its scale (v1: `scale`, the
// header's; v2: the tile's from the block's table): dst[i] = decoded[i] (add = false) or
// dst[i] += q[i] * step for non-zero trits (add = true; step = alpha * the tile's scale).
cudaError_t launch_decode_tiles(const uint8_t* block, const BlockLayout& layout,
                                const uint32_t* tile_lengths, const uint32_t* tile_offsets,
                                float scale, float alpha, bool add, float* dst,
                                cudaStream_t stream);

// dst[i] += alpha * src[i] over the raw payload `src` (fp32 multiply, then add).
cudaError_t launch_raw_add(const uint8_t* src, size_t n, float alpha, float* dst,
                           cudaStream_t stream);

}  // namespace threelc::compression::cuda::detail
