// How a compressed collective encodes and decodes its blocks where the values live. Blocks are
// always in host memory (the transport's); values, residual buffers and destinations are in host
// memory for HostBlockCodec (the CPU codec) and in device memory for the CUDA codec's
// (gpu/device_block_codec.h). The collectives only do pointer arithmetic on values: every
// access goes through the codec.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "threelc/compression/codec.h"

namespace threelc::engine {

class BlockCodec {
 public:
  virtual ~BlockCodec() = default;

  // Whether the CPU may read the values and residual buffers (the error-feedback monitor measures
  // magnitudes only then).
  virtual bool host_values() const = 0;
  // A 3LC block of values[0..count) encoded with `quantize` (sparsity, scale tile) and error
  // feedback into `residual` (null: none) into `out` (max_block_bytes(count) bytes), or a raw
  // block when `quantize` is null.
  virtual compression::Status encode(const float* values, size_t count, float* residual,
                                     const compression::EncodeOptions* quantize,
                                     std::span<uint8_t> out, compression::EncodedBlock* result) = 0;
  // dst[i] = decoded[i], or dst[i] += decoded[i] (add); validated first, dst untouched on error.
  virtual compression::Status decode(std::span<const uint8_t> block, size_t count, bool add,
                                     float* dst) = 0;
  // dst[0..count) = src[0..count).
  virtual void copy(float* dst, const float* src, size_t count) = 0;
};

// The CPU codec (SIMD chosen at run time) on host memory.
class HostBlockCodec final : public BlockCodec {
 public:
  bool host_values() const override { return true; }
  compression::Status encode(const float* values, size_t count, float* residual,
                             const compression::EncodeOptions* quantize, std::span<uint8_t> out,
                             compression::EncodedBlock* result) override;
  compression::Status decode(std::span<const uint8_t> block, size_t count, bool add,
                             float* dst) override;
  void copy(float* dst, const float* src, size_t count) override;
};

}  // namespace threelc::engine
