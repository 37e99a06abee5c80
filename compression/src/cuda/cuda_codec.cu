// The CUDA codec's API (cuda_codec.h): argument checks, the workspace's buffers, and the order
// of kernels and copies on the caller's stream. Blocks are validated on the host with the CPU
// codec's validate(); the raw fallback of the encoder to host memory reuses encode_raw().
#include <cub/device/device_scan.cuh>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "block_io.h"
#include "kernels.cuh"
#include "threelc/compression/cuda_codec.h"

namespace threelc::compression::cuda {

using detail::BlockLayout;
using detail::EncodeBuffers;

namespace {

Status cuda_failure(const char* what, cudaError_t error) {
  cudaGetLastError();  // clear a sticky launch error so that later calls report their own
  return Status::failure(std::string("CUDA codec: ") + what + ": " + cudaGetErrorName(error) +
                         " (" + cudaGetErrorString(error) + ")");
}

#define THREELC_CUDA_TRY(call)                                      \
  do {                                                              \
    if (const cudaError_t error_ = (call); error_ != cudaSuccess) { \
      return cuda_failure(#call, error_);                           \
    }                                                               \
  } while (0)

size_t dtype_bytes(DType dtype) { return dtype == DType::kFloat32 ? 4 : 2; }

bool aligned4(const void* p) { return reinterpret_cast<uintptr_t>(p) % 4 == 0; }

}  // namespace

struct Workspace::Impl {
  int device = -1;
  size_t tiles = 0;             // tiles the per-tile buffers hold
  size_t tile_bytes_count = 0;  // bytes buffers.tile_bytes holds
  EncodeBuffers buffers{};
  void* scan_storage = nullptr;
  size_t scan_bytes = 0;
  uint8_t* block = nullptr;  // device copy of a block
  size_t block_bytes = 0;
  uint8_t* pinned = nullptr;  // pinned host staging (headers, blocks on their way in)
  size_t pinned_bytes = 0;
  cudaEvent_t done = nullptr;  // recorded after the last work that uses these buffers
  size_t hint = 0;

  ~Impl() {
    if (done != nullptr) cudaEventSynchronize(done);
    cudaFree(buffers.max_bits);
    cudaFree(buffers.tile_lengths);
    cudaFree(buffers.tile_offsets);
    cudaFree(buffers.tile_scales);
    cudaFree(buffers.tile_bytes);
    cudaFree(scan_storage);
    cudaFree(block);
    cudaFreeHost(pinned);
    if (done != nullptr) cudaEventDestroy(done);
  }

  // Binds to the current device on first use; orders `stream` after the previous call's work.
  Status begin(cudaStream_t stream) {
    int current = 0;
    THREELC_CUDA_TRY(cudaGetDevice(&current));
    if (device < 0) {
      device = current;
      THREELC_CUDA_TRY(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
      THREELC_CUDA_TRY(cudaMalloc(&buffers.max_bits, sizeof(uint32_t)));
    } else if (device != current) {
      return Status::failure("CUDA codec: workspace belongs to device " + std::to_string(device) +
                             ", the current device is " + std::to_string(current));
    }
    THREELC_CUDA_TRY(cudaStreamWaitEvent(stream, done, 0));
    return Status::success();
  }

  Status end(cudaStream_t stream) {
    THREELC_CUDA_TRY(cudaEventRecord(done, stream));
    return Status::success();
  }

  // Per-tile buffers for blocks of `layout` (of up to max(n, hint) values): lengths, offsets,
  // scales and the scan's storage per tile, and G bytes per tile (tiles of v2's small scale
  // tiles are many and short).
  Status reserve_tiles(const BlockLayout& layout) {
    const BlockLayout largest{layout.count > hint ? layout.count : hint, layout.per_tile,
                              layout.tiled};
    const size_t want = largest.tiles();
    const size_t want_bytes = want * largest.groups_per_tile();
    if (want <= tiles && want_bytes <= tile_bytes_count) return Status::success();
    const size_t new_tiles = want > tiles ? want : tiles;
    const size_t new_bytes = want_bytes > tile_bytes_count ? want_bytes : tile_bytes_count;
    THREELC_CUDA_TRY(cudaEventSynchronize(done));
    cudaFree(buffers.tile_lengths);
    cudaFree(buffers.tile_offsets);
    cudaFree(buffers.tile_scales);
    cudaFree(buffers.tile_bytes);
    cudaFree(scan_storage);
    buffers.tile_lengths = buffers.tile_offsets = nullptr;
    buffers.tile_scales = nullptr;
    buffers.tile_bytes = nullptr;
    scan_storage = nullptr;
    tiles = tile_bytes_count = 0;
    THREELC_CUDA_TRY(cudaMalloc(&buffers.tile_lengths, new_tiles * sizeof(uint32_t)));
    THREELC_CUDA_TRY(cudaMalloc(&buffers.tile_offsets, new_tiles * sizeof(uint32_t)));
    THREELC_CUDA_TRY(cudaMalloc(&buffers.tile_scales, new_tiles * sizeof(float)));
    THREELC_CUDA_TRY(cudaMalloc(&buffers.tile_bytes, new_bytes));
    THREELC_CUDA_TRY(cub::DeviceScan::ExclusiveSum(nullptr, scan_bytes, buffers.tile_lengths,
                                                   buffers.tile_offsets,
                                                   static_cast<int>(new_tiles)));
    THREELC_CUDA_TRY(cudaMalloc(&scan_storage, scan_bytes));
    tiles = new_tiles;
    tile_bytes_count = new_bytes;
    return Status::success();
  }

  Status reserve_block(size_t bytes) {
    if (bytes <= block_bytes) return Status::success();
    THREELC_CUDA_TRY(cudaEventSynchronize(done));
    cudaFree(block);
    block = nullptr;
    block_bytes = 0;
    THREELC_CUDA_TRY(cudaMalloc(&block, bytes));
    block_bytes = bytes;
    return Status::success();
  }

  // Pinned staging of at least `bytes`, free of in-flight copies.
  Status reserve_pinned(size_t bytes) {
    THREELC_CUDA_TRY(cudaEventSynchronize(done));
    if (bytes <= pinned_bytes) return Status::success();
    cudaFreeHost(pinned);
    pinned = nullptr;
    pinned_bytes = 0;
    THREELC_CUDA_TRY(cudaMallocHost(&pinned, bytes < 4096 ? 4096 : bytes));
    pinned_bytes = bytes < 4096 ? 4096 : bytes;
    return Status::success();
  }

  Status scan_tile_offsets(size_t count, cudaStream_t stream) {
    size_t bytes = scan_bytes;
    THREELC_CUDA_TRY(cub::DeviceScan::ExclusiveSum(scan_storage, bytes, buffers.tile_lengths,
                                                   buffers.tile_offsets, static_cast<int>(count),
                                                   stream));
    return Status::success();
  }
};

Workspace::Workspace(size_t max_count) : impl_(std::make_unique<Impl>()) {
  impl_->hint = max_count;
}
Workspace::~Workspace() = default;

bool built() { return true; }

int device_count(std::string* why_none) {
  int count = 0;  // cudaGetDeviceCount leaves it unwritten when it fails
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    cudaGetLastError();
    if (why_none != nullptr) {
      *why_none = std::string("no CUDA device: cudaGetDeviceCount: ") + cudaGetErrorName(error) +
                  " (" + cudaGetErrorString(error) + ")";
    }
    return 0;
  }
  if (count == 0 && why_none != nullptr) *why_none = "no CUDA device: the driver reports none";
  return count;
}

namespace {

Status check_encode(const DeviceValues& values, const EncodeOptions& options, size_t capacity) {
  if (Status status = check_encode_options(options); !status.ok()) return status;
  if (values.data == nullptr && values.count != 0) return Status::failure("values pointer is null");
  if (values.count > UINT32_MAX) {
    return Status::failure("block of " + std::to_string(values.count) +
                           " values exceeds the format's limit of 2^32-1");
  }
  if (capacity < max_block_bytes(values.count)) {
    return Status::failure("output buffer holds " + std::to_string(capacity) +
                           " bytes, a block of " + std::to_string(values.count) +
                           " values may need " + std::to_string(max_block_bytes(values.count)));
  }
  return Status::success();
}

// Queues both encode passes and the block's write (`layout`, v1 or v2) to `block` (device);
// then waits for the header and returns it. The block's max decides the raw fallback in both
// formats: a tile's scale overflows exactly when the block's does.
Status queue_encode(const DeviceValues& values, float* residual, const EncodeOptions& options,
                    const BlockLayout& layout, Workspace::Impl& ws, cudaStream_t stream,
                    bool raw_values, uint8_t* block, BlockHeader* header) {
  const size_t n = values.count;
  if (Status s = ws.reserve_tiles(layout); !s.ok()) return s;
  if (Status s = ws.reserve_pinned(kHeaderBytes); !s.ok()) return s;
  THREELC_CUDA_TRY(cudaMemsetAsync(ws.buffers.max_bits, 0, sizeof(uint32_t), stream));
  THREELC_CUDA_TRY(
      detail::launch_abs_max(values.data, values.dtype, residual, n, ws.buffers.max_bits, stream));
  THREELC_CUDA_TRY(detail::launch_quantize_tiles(values.data, values.dtype, residual, layout,
                                                 options.sparsity, ws.buffers, stream));
  if (Status s = ws.scan_tile_offsets(layout.tiles(), stream); !s.ok()) return s;
  THREELC_CUDA_TRY(detail::launch_write_block(values.data, values.dtype, layout, options.sparsity,
                                              ws.buffers, raw_values, block, stream));
  THREELC_CUDA_TRY(cudaMemcpyAsync(ws.pinned, block, kHeaderBytes, cudaMemcpyDeviceToHost, stream));
  if (Status s = ws.end(stream); !s.ok()) return s;
  THREELC_CUDA_TRY(cudaStreamSynchronize(stream));
  *header = compression::detail::read_header(ws.pinned);
  return Status::success();
}

// The length of a block the write kernel wrote (`header`: its header).
size_t block_bytes_of(const BlockHeader& header) {
  const auto format = static_cast<Format>(header.format);
  if (format == Format::kRaw) return raw_block_bytes(header.count);
  const BlockLayout layout =
      detail::block_layout(format, header.count, kTritsPerGroup * header.reserved);
  return layout.payload_at() + header.payload_bytes;
}

// An empty block needs no device: the CPU encoder writes the same header.
Status encode_empty(const EncodeOptions& options, std::span<uint8_t> out, EncodedBlock* result) {
  return compression::encode(Values{nullptr, DType::kFloat32, 0}, nullptr,
                             EncodeOptions{options.sparsity, Isa::kScalar, options.scale_tile}, out,
                             result);
}

}  // namespace

Status encode_to_host(const DeviceValues& values, float* residual, const EncodeOptions& options,
                      Workspace& workspace, Stream stream, std::span<uint8_t> out,
                      EncodedBlock* result) {
  if (Status s = check_encode(values, options, out.size()); !s.ok()) return s;
  if (values.count == 0) return encode_empty(options, out, result);
  auto* cuda_stream = static_cast<cudaStream_t>(stream);
  Workspace::Impl& ws = workspace.impl();
  if (Status s = ws.begin(cuda_stream); !s.ok()) return s;
  const BlockLayout layout = detail::encode_layout(values.count, options.scale_tile);
  if (Status s = ws.reserve_block(layout.max_bytes()); !s.ok()) return s;
  BlockHeader header;
  if (Status s = queue_encode(values, residual, options, layout, ws, cuda_stream, false, ws.block,
                              &header);
      !s.ok()) {
    return s;
  }
  if (header.format == static_cast<uint8_t>(Format::kRaw)) {
    // Non-finite input, rare: the CPU writes the raw block from a host copy of the values.
    std::vector<uint8_t> host(values.count * dtype_bytes(values.dtype));
    THREELC_CUDA_TRY(cudaMemcpy(host.data(), values.data, host.size(), cudaMemcpyDeviceToHost));
    return encode_raw(Values{host.data(), values.dtype, values.count}, out, result);
  }
  const size_t bytes = block_bytes_of(header);
  THREELC_CUDA_TRY(
      cudaMemcpyAsync(out.data(), ws.block, bytes, cudaMemcpyDeviceToHost, cuda_stream));
  if (Status s = ws.end(cuda_stream); !s.ok()) return s;
  THREELC_CUDA_TRY(cudaStreamSynchronize(cuda_stream));
  *result = EncodedBlock{bytes, static_cast<Format>(header.format), header.scale};
  return Status::success();
}

Status encode_on_device(const DeviceValues& values, float* residual, const EncodeOptions& options,
                        Workspace& workspace, Stream stream, uint8_t* out_device,
                        size_t out_capacity, EncodedBlock* result) {
  if (Status s = check_encode(values, options, out_capacity); !s.ok()) return s;
  if (!aligned4(out_device)) return Status::failure("device output is not 4-byte aligned");
  auto* cuda_stream = static_cast<cudaStream_t>(stream);
  if (values.count == 0) {
    uint8_t header[kHeaderBytes];
    if (Status s = encode_empty(options, header, result); !s.ok()) return s;
    THREELC_CUDA_TRY(
        cudaMemcpyAsync(out_device, header, kHeaderBytes, cudaMemcpyHostToDevice, cuda_stream));
    THREELC_CUDA_TRY(cudaStreamSynchronize(cuda_stream));
    return Status::success();
  }
  Workspace::Impl& ws = workspace.impl();
  if (Status s = ws.begin(cuda_stream); !s.ok()) return s;
  const BlockLayout layout = detail::encode_layout(values.count, options.scale_tile);
  BlockHeader header;
  if (Status s = queue_encode(values, residual, options, layout, ws, cuda_stream, true, out_device,
                              &header);
      !s.ok()) {
    return s;
  }
  *result = EncodedBlock{block_bytes_of(header), static_cast<Format>(header.format), header.scale};
  return Status::success();
}

namespace {

// Queues the decode of a block already on the device (validated: `info`).
Status queue_decode(const uint8_t* block, const BlockInfo& info, bool add, float alpha, float* dst,
                    Workspace::Impl& ws, cudaStream_t stream) {
  const size_t n = info.count;
  if (info.format == Format::kRaw) {
    if (add) {
      THREELC_CUDA_TRY(detail::launch_raw_add(block + kHeaderBytes, n, alpha, dst, stream));
    } else {
      THREELC_CUDA_TRY(
          cudaMemcpyAsync(dst, block + kHeaderBytes, 4 * n, cudaMemcpyDeviceToDevice, stream));
    }
    return Status::success();
  }
  const BlockLayout layout = detail::block_layout(info.format, n, info.tile_values);
  if (Status s = ws.reserve_tiles(layout); !s.ok()) return s;
  THREELC_CUDA_TRY(
      detail::launch_read_tile_table(block, layout.tiles(), ws.buffers.tile_lengths, stream));
  if (Status s = ws.scan_tile_offsets(layout.tiles(), stream); !s.ok()) return s;
  THREELC_CUDA_TRY(detail::launch_decode_tiles(block, layout, ws.buffers.tile_lengths,
                                               ws.buffers.tile_offsets, info.scale, alpha, add, dst,
                                               stream));
  return Status::success();
}

Status decode_host_block(std::span<const uint8_t> block, size_t expected_count, bool add,
                         float alpha, float* dst, Workspace& workspace, Stream stream) {
  BlockInfo info;
  if (Status s = validate(block, expected_count, &info); !s.ok()) return s;
  if (info.count == 0) return Status::success();
  if (dst == nullptr) return Status::failure("destination pointer is null");
  auto* cuda_stream = static_cast<cudaStream_t>(stream);
  Workspace::Impl& ws = workspace.impl();
  if (Status s = ws.begin(cuda_stream); !s.ok()) return s;
  // Through pinned staging, so that the caller may reuse `block` at once.
  if (Status s = ws.reserve_pinned(block.size()); !s.ok()) return s;
  if (Status s = ws.reserve_block(block.size()); !s.ok()) return s;
  std::memcpy(ws.pinned, block.data(), block.size());
  THREELC_CUDA_TRY(
      cudaMemcpyAsync(ws.block, ws.pinned, block.size(), cudaMemcpyHostToDevice, cuda_stream));
  if (Status s = queue_decode(ws.block, info, add, alpha, dst, ws, cuda_stream); !s.ok()) return s;
  return ws.end(cuda_stream);
}

Status decode_device_block(const uint8_t* block, const BlockInfo& info, bool add, float alpha,
                           float* dst, Workspace& workspace, Stream stream) {
  if (info.count == 0) return Status::success();
  if (block == nullptr || dst == nullptr) return Status::failure("block or destination is null");
  if (!aligned4(block)) return Status::failure("device block is not 4-byte aligned");
  if (info.format == Format::kThreeLCTiled &&
      (info.tile_values == 0 || !scale_tile_valid(info.tile_values))) {
    return Status::failure("BlockInfo of a 3LC v2 block has " + std::to_string(info.tile_values) +
                           " values per tile, expected a multiple of 5 from 5 to " +
                           std::to_string(kTileValues) + " (pass validate()'s)");
  }
  auto* cuda_stream = static_cast<cudaStream_t>(stream);
  Workspace::Impl& ws = workspace.impl();
  if (Status s = ws.begin(cuda_stream); !s.ok()) return s;
  if (Status s = queue_decode(block, info, add, alpha, dst, ws, cuda_stream); !s.ok()) return s;
  return ws.end(cuda_stream);
}

}  // namespace

Status decode_from_host(std::span<const uint8_t> block, size_t expected_count, float* dst,
                        Workspace& workspace, Stream stream) {
  return decode_host_block(block, expected_count, false, 1.0f, dst, workspace, stream);
}

Status decode_add_from_host(std::span<const uint8_t> block, size_t expected_count, float alpha,
                            float* dst, Workspace& workspace, Stream stream) {
  return decode_host_block(block, expected_count, true, alpha, dst, workspace, stream);
}

Status decode_on_device(const uint8_t* block_device, const BlockInfo& info, float* dst,
                        Workspace& workspace, Stream stream) {
  return decode_device_block(block_device, info, false, 1.0f, dst, workspace, stream);
}

Status decode_add_on_device(const uint8_t* block_device, const BlockInfo& info, float alpha,
                            float* dst, Workspace& workspace, Stream stream) {
  return decode_device_block(block_device, info, true, alpha, dst, workspace, stream);
}

}  // namespace threelc::compression::cuda
