// The encoder's kernels: pass 1 (block max of |x + e|), pass 2 (per tile: v2's tile max and
// scale, quantize with error feedback, base-3^5 pack, zero-run encode; one CUDA block per tile),
// and the write of the compacted block (v1 or v2). Arithmetic is fp32 add and compare as in the
// CPU's reference kernels (kernels_reference.h); the build passes --fmad=false.
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include "device_values.cuh"
#include "kernels.cuh"
#include "tile_rules.h"

namespace threelc::compression::cuda::detail {
namespace {

constexpr int kMaxThreads = 256;

struct MaxOp {
  template <typename T>
  __device__ T operator()(const T& a, const T& b) const {
    return a > b ? a : b;
  }
};

// a = x[i] + e[i] (fp32 add), or x[i] without a residual buffer.
template <typename Input>
__device__ float plus_error(Input x, const float* e, size_t i) {
  return e != nullptr ? __fadd_rn(x[i], e[i]) : x[i];
}

// max(local, bits of |x[i] + e[i]| for i = first, first + stride, ... < end): the bit pattern
// with the sign cleared, as the CPU's abs_max_bits (a NaN or Inf gives >= kNonFiniteBits).
template <typename Input>
__device__ uint32_t abs_max_bits(Input x, const float* e, size_t first, size_t end, size_t stride,
                                 uint32_t local) {
  for (size_t i = first; i < end; i += stride) {
    const uint32_t bits = __float_as_uint(plus_error(x, e, i)) & 0x7FFFFFFFu;
    local = bits > local ? bits : local;
  }
  return local;
}

// The largest `local` of the CUDA block's kThreads threads, returned to every thread.
template <int kThreads>
__device__ uint32_t block_max(uint32_t local) {
  using Reduce = cub::BlockReduce<uint32_t, kThreads>;
  __shared__ typename Reduce::TempStorage storage;
  __shared__ uint32_t result;
  const uint32_t reduced = Reduce(storage).Reduce(local, MaxOp{});
  if (threadIdx.x == 0) result = reduced;
  __syncthreads();
  return result;
}

template <typename Input>
__global__ void abs_max_kernel(Input x, const float* e, size_t n, uint32_t* max_bits) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  const uint32_t local =
      abs_max_bits(x, e, static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x, n, stride, 0);
  const uint32_t bits = block_max<kMaxThreads>(local);
  if (threadIdx.x == 0 && bits != 0) atomicMax(max_bits, bits);
}

// One CUDA block per tile. Thread layout: while taking v2's tile max, thread t reads values
// t, t + 256, ...; while quantizing, it handles groups t, t + 256, ... (so that a warp reads 32
// consecutive values of each of the five slices); while encoding, groups [16 t, 16 t + 16) (a
// blocked arrangement for the scans).
template <typename Input>
__global__ void __launch_bounds__(kTileThreads)
    quantize_tiles_kernel(Input x, float* e, BlockLayout layout, float sparsity,
                          EncodeBuffers buffers) {
  const size_t t = blockIdx.x;
  float scale;
  if (!block_scale(*buffers.max_bits, sparsity, &scale)) {
    if (threadIdx.x == 0) buffers.tile_lengths[t] = 0;
    return;
  }
  const size_t begin = layout.first_value(t);
  const int values = static_cast<int>(layout.values_in(t));
  const int g = static_cast<int>(tile_groups(static_cast<size_t>(values)));
  if (layout.tiled) {
    // v2: the tile's own scale M_t * s (finite: M_t is at most the block's M), read by the
    // write kernel from tile_scales. Every read of e here precedes the reduction's barrier,
    // every write below follows it.
    const uint32_t local = abs_max_bits(x, e, begin + threadIdx.x,
                                        begin + static_cast<size_t>(values), kTileThreads, 0);
    scale = scale_of(block_max<kTileThreads>(local), sparsity);
    if (threadIdx.x == 0) buffers.tile_scales[t] = scale;
  }
  const float h = __fmul_rn(0.5f, scale);

  __shared__ uint8_t groups[kGroupsPerTile];
  __shared__ uint8_t encoded[kGroupsPerTile];
  constexpr uint32_t kWeight[kTritsPerGroup] = {81, 27, 9, 3, 1};
  for (int j = threadIdx.x; j < g; j += kTileThreads) {
    uint32_t byte = 0;
#pragma unroll
    for (int k = 0; k < static_cast<int>(kTritsPerGroup); ++k) {
      const int i = j + k * g;
      uint32_t trit = 1;
      if (i < values) {
        const size_t at = begin + static_cast<size_t>(i);
        const float a = plus_error(x, e, at);
        float rest = a;
        if (a > h) {
          trit = 2;
          rest = __fsub_rn(a, scale);
        } else if (a < -h) {
          trit = 0;
          rest = __fadd_rn(a, scale);
        }
        if (e != nullptr) e[at] = rest;
      }
      byte += kWeight[k] * trit;
    }
    groups[j] = static_cast<uint8_t>(byte);
  }
  __syncthreads();

  using Scan = cub::BlockScan<int, kTileThreads>;
  __shared__ typename Scan::TempStorage scan_storage;
  const int first = static_cast<int>(threadIdx.x) * kGroupsPerThread;
  int last_literal[kGroupsPerThread];
#pragma unroll
  for (int q = 0; q < kGroupsPerThread; ++q) {
    last_literal[q] = first + q < g ? rules::literal_index(groups, first + q) : -1;
  }
  Scan(scan_storage).InclusiveScan(last_literal, last_literal, MaxOp{});
  __syncthreads();
  int offset[kGroupsPerThread];
#pragma unroll
  for (int q = 0; q < kGroupsPerThread; ++q) {
    offset[q] = first + q < g ? rules::encoded_bytes_at(groups, g, first + q, last_literal[q]) : 0;
  }
  int length;
  Scan(scan_storage).ExclusiveSum(offset, offset, length);
#pragma unroll
  for (int q = 0; q < kGroupsPerThread; ++q) {
    if (first + q < g) {
      rules::write_encoded_at(groups, g, first + q, last_literal[q], encoded, offset[q]);
    }
  }
  __syncthreads();
  uint8_t* out = buffers.tile_bytes + t * layout.groups_per_tile();
  for (int p = threadIdx.x; p < length; p += kTileThreads) out[p] = encoded[p];
  if (threadIdx.x == 0) buffers.tile_lengths[t] = static_cast<uint32_t>(length);
}

__device__ void store_bytes(uint8_t* to, const void* from, int bytes) {
  for (int b = 0; b < bytes; ++b) to[b] = static_cast<const uint8_t*>(from)[b];
}

// One CUDA block per tile: its table entries (v2: length and scale) and its bytes at their
// place; block 0 also writes the header (v2: G in the reserved field, the block's scale, which
// is the largest tile scale). For a non-finite scale, the raw header instead, and the widened
// values when raw_values.
template <typename Input>
__global__ void write_block_kernel(Input x, BlockLayout layout, float sparsity,
                                   EncodeBuffers buffers, bool raw_values, uint8_t* block) {
  const size_t n = layout.count;
  const size_t tiles = layout.tiles();
  float scale;
  const bool finite = block_scale(*buffers.max_bits, sparsity, &scale);
  if (!finite && raw_values) {
    float* values = reinterpret_cast<float*>(block + kHeaderBytes);
    const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
    for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
         i += stride) {
      values[i] = x[i];
    }
  }
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    const uint32_t payload = finite
                                 ? buffers.tile_offsets[tiles - 1] + buffers.tile_lengths[tiles - 1]
                                 : static_cast<uint32_t>(4 * n);
    const BlockHeader header{static_cast<uint8_t>(finite ? layout.format() : Format::kRaw),
                             0,
                             static_cast<uint16_t>(finite ? layout.reserved() : 0),
                             static_cast<uint32_t>(n),
                             finite ? scale : 0.0f,
                             payload};
    store_bytes(block, &header, sizeof header);
  }
  if (!finite) return;
  const size_t t = blockIdx.x;
  const uint32_t length = buffers.tile_lengths[t];
  if (threadIdx.x == 0) {
    const uint16_t entry = static_cast<uint16_t>(length);
    store_bytes(block + layout.lengths_at() + t * kTileLengthBytes, &entry, sizeof entry);
    if (layout.tiled) {
      const float tile_scale = buffers.tile_scales[t];
      store_bytes(block + layout.scales_at() + t * kTileScaleBytes, &tile_scale, sizeof tile_scale);
    }
  }
  const uint8_t* from = buffers.tile_bytes + t * layout.groups_per_tile();
  uint8_t* to = block + layout.payload_at() + buffers.tile_offsets[t];
  for (uint32_t p = threadIdx.x; p < length; p += blockDim.x) to[p] = from[p];
}

unsigned grid_for(size_t n, size_t per_block) {
  const size_t blocks = (n + per_block - 1) / per_block;
  return static_cast<unsigned>(blocks < 65535 * 16 ? (blocks > 0 ? blocks : 1) : 65535 * 16);
}

}  // namespace

cudaError_t launch_abs_max(const void* x, DType dtype, const float* e, size_t n, uint32_t* max_bits,
                           cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return with_input(x, dtype, [&](auto input) {
    // 16 values per thread: enough work per block that the atomics stay few.
    abs_max_kernel<<<grid_for(n, kMaxThreads * 16), kMaxThreads, 0, stream>>>(input, e, n,
                                                                              max_bits);
    return cudaGetLastError();
  });
}

cudaError_t launch_quantize_tiles(const void* x, DType dtype, float* e, const BlockLayout& layout,
                                  float sparsity, const EncodeBuffers& buffers,
                                  cudaStream_t stream) {
  if (layout.count == 0) return cudaSuccess;
  return with_input(x, dtype, [&](auto input) {
    quantize_tiles_kernel<<<static_cast<unsigned>(layout.tiles()), kTileThreads, 0, stream>>>(
        input, e, layout, sparsity, buffers);
    return cudaGetLastError();
  });
}

cudaError_t launch_write_block(const void* x, DType dtype, const BlockLayout& layout,
                               float sparsity, const EncodeBuffers& buffers, bool raw_values,
                               uint8_t* block, cudaStream_t stream) {
  if (layout.count == 0) return cudaSuccess;
  return with_input(x, dtype, [&](auto input) {
    write_block_kernel<<<static_cast<unsigned>(layout.tiles()), kTileThreads, 0, stream>>>(
        input, layout, sparsity, buffers, raw_values, block);
    return cudaGetLastError();
  });
}

}  // namespace threelc::compression::cuda::detail
