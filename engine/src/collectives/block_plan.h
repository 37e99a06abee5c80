// How push_pull cuts a fused buffer: N contiguous segments (rank j owns segment j), each cut
// into chunks of chunk_bytes from the segment's start, and every block the intersection of one
// chunk and one tensor, so a block never spans two tensors. Pure arithmetic, no I/O.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <vector>

namespace threelc::engine {

// One tensor inside a fused buffer: elements [offset, offset + count).
struct TensorSlice {
  std::string name;
  size_t offset = 0;
  size_t count = 0;
};

struct Block {
  size_t offset = 0;  // in the fused buffer
  size_t count = 0;   // > 0
  size_t tensor = 0;  // index into the tensor list
};

struct BlockPlan {
  std::vector<Block> blocks;  // segment 0's blocks first, each segment in buffer order
  // Segment j's blocks are blocks[segment_begin[j] .. segment_begin[j + 1]).
  std::vector<size_t> segment_begin;
  std::span<const Block> segment(int j) const {
    const auto b = segment_begin[static_cast<size_t>(j)];
    const auto e = segment_begin[static_cast<size_t>(j) + 1];
    return std::span<const Block>(blocks).subspan(b, e - b);
  }
};

// Segment j of `total` elements over `ranks`: the first total % ranks segments get one more.
size_t segment_start(size_t total, int ranks, int j);

// Throws std::invalid_argument unless `tensors` tile [0, total) exactly, in order (zero-sized
// tensors allowed), with distinct names.
void check_layout(size_t total, std::span<const TensorSlice> tensors);

// Throws std::invalid_argument unless `tensors` tile [0, total) exactly, in order (zero-sized
// tensors allowed), with distinct names; chunk_bytes must hold at least one element of
// `element_bytes` bytes (fp32 for push_pull; chunks are chunk_bytes / element_bytes elements).
BlockPlan plan_blocks(size_t total, std::span<const TensorSlice> tensors, int ranks,
                      size_t chunk_bytes, size_t element_bytes = sizeof(float));

}  // namespace threelc::engine
