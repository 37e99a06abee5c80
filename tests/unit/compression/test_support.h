// Small helpers shared by the compression tests.
#pragma once

#include <bit>
#include <cstdint>
#include <vector>

namespace threelc::compression::test_support {

using Bytes = std::vector<uint8_t>;

inline uint32_t bits_of(float v) { return std::bit_cast<uint32_t>(v); }
inline float float_of(uint32_t b) { return std::bit_cast<float>(b); }

}  // namespace threelc::compression::test_support
