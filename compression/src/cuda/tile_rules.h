// Internal: the per-position rules by which the CUDA kernels zero-run encode and expand a tile
// in parallel. Plain C++ that nvcc also compiles for the device, so that the host test
// (tests/compression/cuda_tile_rules_test.cc) checks the very formulas the kernels run against the
// CPU encoder, on machines without a GPU.
//
// Encoding a tile's g group bytes in parallel (the serial definition is
// kernels_reference.h's encode_rest):
//   1. last_literal[j] = the largest i <= j whose group is not the zero group, or -1: an
//      inclusive max-scan of literal_index(j).
//   2. every position emits encoded_bytes_at(j) bytes: 1 for a literal; for the last zero
//      group of a run (run_ends_at), the bytes of the whole run of r = j - last_literal[j]
//      groups; 0 otherwise. Runs end before the next literal, so positions stay in order.
//   3. an exclusive sum-scan of those counts gives each position's offset, where
//      write_encoded_at writes its bytes.
// Expanding a tile's bytes in parallel: expanded_groups_of(byte) groups each, an exclusive
// sum-scan for the first group of each byte, then write_expanded_at.
#pragma once

#include <cstddef>
#include <cstdint>

#include "host_device.h"
#include "threelc/compression/block_format.h"

namespace threelc::compression::cuda::rules {

// The index j when group j is a literal (not the zero group), else -1.
THREELC_HOST_DEVICE inline int literal_index(const uint8_t* groups, int j) {
  return groups[j] != kZeroGroup ? j : -1;
}

// Whether a run of zero groups ends at j (group j is zero and j + 1 is a literal or the end).
THREELC_HOST_DEVICE inline bool run_ends_at(const uint8_t* groups, int g, int j) {
  return groups[j] == kZeroGroup && (j + 1 == g || groups[j + 1] != kZeroGroup);
}

// Bytes that encode a run of r >= 1 zero groups: one 255 per 14 groups, then one byte for the
// remaining 1..13 groups (121 for one, 243 + r - 2 for r >= 2).
THREELC_HOST_DEVICE inline int run_bytes(int r) {
  return r / static_cast<int>(kRun14) + (r % static_cast<int>(kRun14) != 0 ? 1 : 0);
}

// Bytes emitted at position j, given last_literal[j] (step 1).
THREELC_HOST_DEVICE inline int encoded_bytes_at(const uint8_t* groups, int g, int j,
                                                int last_literal) {
  if (groups[j] != kZeroGroup) return 1;
  return run_ends_at(groups, g, j) ? run_bytes(j - last_literal) : 0;
}

// Writes position j's encoded bytes at out[offset] (offset from step 3).
THREELC_HOST_DEVICE inline void write_encoded_at(const uint8_t* groups, int g, int j,
                                                 int last_literal, uint8_t* out, int offset) {
  if (groups[j] != kZeroGroup) {
    out[offset] = groups[j];
    return;
  }
  if (!run_ends_at(groups, g, j)) return;
  int r = j - last_literal;
  for (; r >= static_cast<int>(kRun14); r -= static_cast<int>(kRun14)) out[offset++] = kRun14Byte;
  if (r == 1) {
    out[offset] = kZeroGroup;
  } else if (r >= 2) {
    out[offset] = static_cast<uint8_t>(kFirstRunByte + (r - 2));
  }
}

// Groups one encoded byte expands to: 1 for a literal (0..242), b - 241 for a run byte.
THREELC_HOST_DEVICE inline int expanded_groups_of(uint8_t b) {
  return b < kFirstRunByte ? 1 : b - 241;
}

// Writes the groups of encoded byte b at groups[first] (first from the exclusive scan).
THREELC_HOST_DEVICE inline void write_expanded_at(uint8_t b, uint8_t* groups, int first) {
  if (b < kFirstRunByte) {
    groups[first] = b;
    return;
  }
  for (int k = 0; k < b - 241; ++k) groups[first + k] = kZeroGroup;
}

}  // namespace threelc::compression::cuda::rules
