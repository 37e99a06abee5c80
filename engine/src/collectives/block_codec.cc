#include "collectives/block_codec.h"

#include <cstring>

namespace threelc::engine {

namespace cc = threelc::compression;

cc::Status HostBlockCodec::encode(const float* values, size_t count, float* residual,
                                  const cc::EncodeOptions* quantize, std::span<uint8_t> out,
                                  cc::EncodedBlock* result) {
  const cc::Values input{values, cc::DType::kFloat32, count};
  return quantize != nullptr ? cc::encode(input, residual, *quantize, out, result)
                             : cc::encode_raw(input, out, result);
}

cc::Status HostBlockCodec::decode(std::span<const uint8_t> block, size_t count, bool add,
                                  float* dst) {
  return add ? cc::decode_add(block, count, 1.0f, dst) : cc::decode(block, count, dst);
}

void HostBlockCodec::copy(float* dst, const float* src, size_t count) {
  if (count > 0 && dst != src) std::memcpy(dst, src, count * sizeof(float));
}

}  // namespace threelc::engine
