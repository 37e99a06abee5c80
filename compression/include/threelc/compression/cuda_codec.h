// The 3LC codec on a CUDA device: the same block formats as the CPU codec (codec.h: v1, and v2
// with EncodeOptions::scale_tile), blocks byte-identical to the CPU encoder's for the same
// input. Values, residual buffers and decode targets are device pointers; blocks travel through
// host memory (the transport's), so only compressed bytes cross PCIe. Every call is ordered on
// the given CUDA stream.
//
// This header needs no CUDA headers (a stream is passed as void*), so the engine compiles the
// same with or without the CUDA toolkit. In a build without nvcc (built() is false) every
// function returns a failed Status saying so; so does every call on a machine without a GPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "threelc/compression/block_format.h"
#include "threelc/compression/codec.h"
#include "threelc/compression/status.h"

namespace threelc::compression::cuda {

// Whether this build has the CUDA codec (nvcc was found when CMake ran).
bool built();

// The number of CUDA devices this process can use: 0 when the build has no CUDA codec, the
// driver reports none, or a CUDA call fails (error 35 on machines without a GPU). `why_none`,
// when given, receives the reason for a 0 ("no CUDA device: cudaGetDeviceCount: ...").
int device_count(std::string* why_none = nullptr);

using Stream = void*;  // a cudaStream_t; nullptr is the legacy default stream

// Values of dtype kFloat32, kFloat16 or kBFloat16 in device memory.
struct DeviceValues {
  const void* data = nullptr;
  DType dtype = DType::kFloat32;
  size_t count = 0;
};

// Device and pinned host scratch for blocks of up to `max_count` values on one device (the
// current device when it is made): per-tile partial maxima and lengths, the scan's temporary
// storage, the device copy of a block. One per thread of use; it grows on demand.
class Workspace {
 public:
  explicit Workspace(size_t max_count = 0);
  ~Workspace();
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;

  struct Impl;
  Impl& impl() { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

// Encodes `values` with fused error feedback (`residual`: device fp32, values.count elements,
// or null for a zero residual that is not written back) into `out`, host memory of at least
// max_block_bytes(values.count) bytes (pinned memory makes the copy faster). Returns once the
// block is in `out` (it synchronizes `stream`). Non-finite input gives a raw block and leaves
// `residual` untouched, as on the CPU.
Status encode_to_host(const DeviceValues& values, float* residual, const EncodeOptions& options,
                      Workspace& workspace, Stream stream, std::span<uint8_t> out,
                      EncodedBlock* result);

// The same, writing the block to device memory `out_device` (capacity `out_capacity` bytes);
// result->bytes is the block's length. For benchmarks and device-to-device use.
Status encode_on_device(const DeviceValues& values, float* residual, const EncodeOptions& options,
                        Workspace& workspace, Stream stream, uint8_t* out_device,
                        size_t out_capacity, EncodedBlock* result);

// Validates `block` (host memory) completely on the CPU first, then copies it to the device
// and decodes into `dst` (device fp32): dst[i] = decoded[i]. On error dst is untouched.
// Returns with the work queued on `stream` (the block's bytes may be reused at once).
Status decode_from_host(std::span<const uint8_t> block, size_t expected_count, float* dst,
                        Workspace& workspace, Stream stream);

// dst[i] += alpha * decoded[i] (fp32 multiply, then fp32 add; no FMA), as the CPU's
// decode_add: zero trits leave dst[i] as it is.
Status decode_add_from_host(std::span<const uint8_t> block, size_t expected_count, float alpha,
                            float* dst, Workspace& workspace, Stream stream);

// The two decoders on a block already in device memory, which the caller validated (`info`
// from validate() on a host copy of the same bytes). For benchmarks and device-to-device use.
Status decode_on_device(const uint8_t* block_device, const BlockInfo& info, float* dst,
                        Workspace& workspace, Stream stream);
Status decode_add_on_device(const uint8_t* block_device, const BlockInfo& info, float alpha,
                            float* dst, Workspace& workspace, Stream stream);

}  // namespace threelc::compression::cuda
