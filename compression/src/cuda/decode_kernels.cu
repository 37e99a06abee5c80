// The decoder's kernels: one CUDA block per tile expands the tile's zero-run bytes into its
// groups in shared memory (a scan places each byte's groups) and unpacks the trits, times the
// tile's scale (v1: the block's; v2: its entry in the block's scale table), into the
// destination, or adds them to it. The block was validated on the host first (decode.cc's
// validate), so every tile expands to exactly its groups.
#include <cub/block/block_scan.cuh>

#include "kernels.cuh"
#include "tile_rules.h"

namespace threelc::compression::cuda::detail {
namespace {

__global__ void read_tile_table_kernel(const uint8_t* block, size_t tiles, uint32_t* tile_lengths) {
  const uint8_t* table = block + kHeaderBytes;
  for (size_t t = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < tiles;
       t += static_cast<size_t>(gridDim.x) * blockDim.x) {
    tile_lengths[t] = table[2 * t] | (static_cast<uint32_t>(table[2 * t + 1]) << 8);
  }
}

// The little-endian f32 at `at` (a v2 tile scale: not necessarily 4-byte aligned).
__device__ float read_f32(const uint8_t* at) {
  const uint32_t bits = at[0] | (static_cast<uint32_t>(at[1]) << 8) |
                        (static_cast<uint32_t>(at[2]) << 16) | (static_cast<uint32_t>(at[3]) << 24);
  return __uint_as_float(bits);
}

// Thread layout: while expanding, thread t takes encoded bytes [16 t, 16 t + 16); while
// unpacking, groups t, t + 256, ... (a warp writes 32 consecutive values of each slice).
template <bool kAdd>
__global__ void __launch_bounds__(kTileThreads)
    decode_tiles_kernel(const uint8_t* block, BlockLayout layout, const uint32_t* tile_lengths,
                        const uint32_t* tile_offsets, float scale, float alpha, float* dst) {
  const size_t t = blockIdx.x;
  const size_t begin = layout.first_value(t);
  const int values = static_cast<int>(layout.values_in(t));
  const int g = static_cast<int>(tile_groups(static_cast<size_t>(values)));
  const int length = static_cast<int>(tile_lengths[t]);
  const uint8_t* bytes = block + layout.payload_at() + tile_offsets[t];
  // decode.cc's for_each_tile: the tile's scale; decode_add steps by alpha * scale (fp32).
  const float tile_scale =
      layout.tiled ? read_f32(block + layout.scales_at() + t * kTileScaleBytes) : scale;
  const float scale_or_step = kAdd ? __fmul_rn(alpha, tile_scale) : tile_scale;

  __shared__ uint8_t encoded[kGroupsPerTile];
  __shared__ uint8_t groups[kGroupsPerTile];
  for (int p = threadIdx.x; p < length; p += kTileThreads) encoded[p] = bytes[p];
  __syncthreads();

  using Scan = cub::BlockScan<int, kTileThreads>;
  __shared__ typename Scan::TempStorage scan_storage;
  const int first = static_cast<int>(threadIdx.x) * kGroupsPerThread;
  int at[kGroupsPerThread];
#pragma unroll
  for (int q = 0; q < kGroupsPerThread; ++q) {
    at[q] = first + q < length ? rules::expanded_groups_of(encoded[first + q]) : 0;
  }
  Scan(scan_storage).ExclusiveSum(at, at);
#pragma unroll
  for (int q = 0; q < kGroupsPerThread; ++q) {
    if (first + q < length) rules::write_expanded_at(encoded[first + q], groups, at[q]);
  }
  __syncthreads();

  float* out = dst + begin;
  for (int j = threadIdx.x; j < g; j += kTileThreads) {
    uint32_t v = groups[j];
    if (kAdd && v == kZeroGroup) continue;
#pragma unroll
    for (int k = static_cast<int>(kTritsPerGroup) - 1; k >= 0; --k) {
      const uint32_t trit = v % 3;
      v /= 3;
      const int i = j + k * g;
      if (i >= values) continue;
      if (kAdd) {
        if (trit != 1) out[i] = __fadd_rn(out[i], trit == 2 ? scale_or_step : -scale_or_step);
      } else {
        out[i] = trit == 2 ? scale_or_step : (trit == 0 ? -scale_or_step : 0.0f);
      }
    }
  }
}

__global__ void raw_add_kernel(const uint8_t* src, size_t n, float alpha, float* dst) {
  const float* values = reinterpret_cast<const float*>(src);
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    dst[i] = __fadd_rn(dst[i], __fmul_rn(alpha, values[i]));
  }
}

unsigned blocks_for(size_t n, size_t per_block) {
  const size_t blocks = (n + per_block - 1) / per_block;
  return static_cast<unsigned>(blocks < 65535 * 16 ? (blocks > 0 ? blocks : 1) : 65535 * 16);
}

}  // namespace

cudaError_t launch_read_tile_table(const uint8_t* block, size_t tiles, uint32_t* tile_lengths,
                                   cudaStream_t stream) {
  if (tiles == 0) return cudaSuccess;
  read_tile_table_kernel<<<blocks_for(tiles, 256), 256, 0, stream>>>(block, tiles, tile_lengths);
  return cudaGetLastError();
}

cudaError_t launch_decode_tiles(const uint8_t* block, const BlockLayout& layout,
                                const uint32_t* tile_lengths, const uint32_t* tile_offsets,
                                float scale, float alpha, bool add, float* dst,
                                cudaStream_t stream) {
  if (layout.count == 0) return cudaSuccess;
  const unsigned tiles = static_cast<unsigned>(layout.tiles());
  if (add) {
    decode_tiles_kernel<true><<<tiles, kTileThreads, 0, stream>>>(block, layout, tile_lengths,
                                                                  tile_offsets, scale, alpha, dst);
  } else {
    decode_tiles_kernel<false><<<tiles, kTileThreads, 0, stream>>>(block, layout, tile_lengths,
                                                                   tile_offsets, scale, alpha, dst);
  }
  return cudaGetLastError();
}

cudaError_t launch_raw_add(const uint8_t* src, size_t n, float alpha, float* dst,
                           cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  raw_add_kernel<<<blocks_for(n, 256 * 8), 256, 0, stream>>>(src, n, alpha, dst);
  return cudaGetLastError();
}

}  // namespace threelc::compression::cuda::detail
