// The encoder's kernels: pass 1 (block max of |x + e|), pass 2 (per tile: quantize with error
// feedback, base-3^5 pack, zero-run encode; one CUDA block per tile), and the write of the
// compacted block. Arithmetic is fp32 add and compare as in the CPU's reference kernels
// (kernels_reference.h); the build passes --fmad=false.
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

template <typename Input>
__global__ void abs_max_kernel(Input x, const float* e, size_t n, uint32_t* max_bits) {
  uint32_t local = 0;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float a = e != nullptr ? __fadd_rn(x[i], e[i]) : x[i];
    const uint32_t bits = __float_as_uint(a) & 0x7FFFFFFFu;
    local = bits > local ? bits : local;
  }
  using Reduce = cub::BlockReduce<uint32_t, kMaxThreads>;
  __shared__ typename Reduce::TempStorage storage;
  const uint32_t block_max = Reduce(storage).Reduce(local, MaxOp{});
  if (threadIdx.x == 0 && block_max != 0) atomicMax(max_bits, block_max);
}

// One CUDA block per tile. Thread layout: while quantizing, thread t handles groups
// t, t + 256, ... (so that a warp reads 32 consecutive values of each of the five slices);
// while encoding, groups [16 t, 16 t + 16) (a blocked arrangement for the scans).
template <typename Input>
__global__ void __launch_bounds__(kTileThreads)
    quantize_tiles_kernel(Input x, float* e, size_t n, float sparsity, EncodeBuffers buffers) {
  float scale;
  if (!block_scale(*buffers.max_bits, sparsity, &scale)) {
    if (threadIdx.x == 0) buffers.tile_lengths[blockIdx.x] = 0;
    return;
  }
  const float h = __fmul_rn(0.5f, scale);
  const size_t begin = static_cast<size_t>(blockIdx.x) * kTileValues;
  const int values = static_cast<int>(n - begin < kTileValues ? n - begin : kTileValues);
  const int g = static_cast<int>(tile_groups(static_cast<size_t>(values)));

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
        const float a = e != nullptr ? __fadd_rn(x[at], e[at]) : x[at];
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
  uint8_t* out = buffers.tile_bytes + static_cast<size_t>(blockIdx.x) * kGroupsPerTile;
  for (int p = threadIdx.x; p < length; p += kTileThreads) out[p] = encoded[p];
  if (threadIdx.x == 0) buffers.tile_lengths[blockIdx.x] = static_cast<uint32_t>(length);
}

__device__ void store_bytes(uint8_t* to, const void* from, int bytes) {
  for (int b = 0; b < bytes; ++b) to[b] = static_cast<const uint8_t*>(from)[b];
}

// One CUDA block per tile: its table entry and its bytes at their place; block 0 also writes
// the header. For a non-finite scale, the raw header instead, and the widened values when
// raw_values.
template <typename Input>
__global__ void write_block_kernel(Input x, size_t n, float sparsity, EncodeBuffers buffers,
                                   bool raw_values, uint8_t* block) {
  const size_t tiles = tile_count(n);
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
    const BlockHeader header{static_cast<uint8_t>(finite ? Format::kThreeLC : Format::kRaw),
                             0,
                             0,
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
    store_bytes(block + kHeaderBytes + t * kTileLengthBytes, &entry, sizeof entry);
  }
  const uint8_t* from = buffers.tile_bytes + t * kGroupsPerTile;
  uint8_t* to = block + kHeaderBytes + tiles * kTileLengthBytes + buffers.tile_offsets[t];
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

cudaError_t launch_quantize_tiles(const void* x, DType dtype, float* e, size_t n, float sparsity,
                                  const EncodeBuffers& buffers, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return with_input(x, dtype, [&](auto input) {
    quantize_tiles_kernel<<<static_cast<unsigned>(tile_count(n)), kTileThreads, 0, stream>>>(
        input, e, n, sparsity, buffers);
    return cudaGetLastError();
  });
}

cudaError_t launch_write_block(const void* x, DType dtype, size_t n, float sparsity,
                               const EncodeBuffers& buffers, bool raw_values, uint8_t* block,
                               cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return with_input(x, dtype, [&](auto input) {
    write_block_kernel<<<static_cast<unsigned>(tile_count(n)), kTileThreads, 0, stream>>>(
        input, n, sparsity, buffers, raw_values, block);
    return cudaGetLastError();
  });
}

}  // namespace threelc::compression::cuda::detail
