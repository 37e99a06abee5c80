// Internal: tables shared by the SIMD kernel files (kernels_avx2.cc, kernels_avx512.cc). Their
// scalar heads and tails call the range functions of kernels_reference.h. Internal linkage for
// the reason given there: each kernel file is compiled with its own -m flags.
#pragma once

#include <cstdint>

#include "threelc/compression/block_format.h"

namespace threelc::compression::detail::simd {
namespace {

// Per encoded byte b: the group byte written at the current position (b itself for a literal,
// 121 for a run) and the number of groups it stands for (1, or b - 241 for a run). Table
// lookups instead of a branch: literals and runs alternate unpredictably.
struct ExpandTable {
  uint8_t value[256];
  uint8_t advance[256];
};

constexpr ExpandTable make_expand_table() {
  ExpandTable t{};
  for (uint32_t b = 0; b < 256; ++b) {
    const bool run = b >= kFirstRunByte;
    t.value[b] = static_cast<uint8_t>(run ? uint32_t{kZeroGroup} : b);
    t.advance[b] = static_cast<uint8_t>(run ? b - 241u : 1u);
  }
  return t;
}

constexpr ExpandTable kExpand = make_expand_table();

}  // namespace
}  // namespace threelc::compression::detail::simd
