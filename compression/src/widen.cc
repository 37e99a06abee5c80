#include "widen.h"

#include <cstring>

#include "threelc/compression/float16.h"
#include "threelc/compression/float16_arrays.h"

namespace threelc::compression::detail {

void widen(DType dtype, const void* src, size_t offset, size_t n, float* dst) {
  if (dtype == DType::kFloat32) {
    std::memcpy(dst, static_cast<const float*>(src) + offset, n * sizeof(float));
    return;
  }
  const auto* halves = static_cast<const uint16_t*>(src) + offset;
  if (dtype == DType::kBFloat16) {
    for (size_t i = 0; i < n; ++i) dst[i] = bfloat16_to_float(halves[i]);
  } else {
    halves_to_floats(halves, dst, n);
  }
}

}  // namespace threelc::compression::detail
