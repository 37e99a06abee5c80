#include "collectives/block_plan.h"

#include <algorithm>
#include <stdexcept>
#include <unordered_set>

namespace threelc::engine {

size_t segment_start(size_t total, int ranks, int j) {
  const auto n = static_cast<size_t>(ranks);
  const auto k = static_cast<size_t>(j);
  return k * (total / n) + std::min(k, total % n);
}

void check_layout(size_t total, std::span<const TensorSlice> tensors) {
  size_t next = 0;
  std::unordered_set<std::string> names;
  for (const auto& t : tensors) {
    if (t.offset != next) {
      throw std::invalid_argument("block plan: tensor '" + t.name + "' starts at " +
                                  std::to_string(t.offset) + ", expected " + std::to_string(next) +
                                  " (tensors must tile the fused buffer in order)");
    }
    if (!names.insert(t.name).second) {
      throw std::invalid_argument("block plan: tensor '" + t.name + "' appears twice");
    }
    next += t.count;
  }
  if (next != total) {
    throw std::invalid_argument("block plan: tensors cover " + std::to_string(next) +
                                " elements of a fused buffer of " + std::to_string(total));
  }
}

BlockPlan plan_blocks(size_t total, std::span<const TensorSlice> tensors, int ranks,
                      size_t chunk_bytes, size_t element_bytes) {
  if (ranks < 1) throw std::invalid_argument("block plan: fewer than one rank");
  const size_t chunk_elements = element_bytes == 0 ? 0 : chunk_bytes / element_bytes;
  if (chunk_elements == 0) {
    throw std::invalid_argument("block plan: chunk_bytes " + std::to_string(chunk_bytes) +
                                " holds no value of " + std::to_string(element_bytes) + " bytes");
  }
  check_layout(total, tensors);
  BlockPlan plan;
  plan.segment_begin.reserve(static_cast<size_t>(ranks) + 1);
  size_t tensor = 0;
  for (int j = 0; j < ranks; ++j) {
    plan.segment_begin.push_back(plan.blocks.size());
    const size_t begin = segment_start(total, ranks, j);
    const size_t end = segment_start(total, ranks, j + 1);
    for (size_t chunk_begin = begin; chunk_begin < end; chunk_begin += chunk_elements) {
      const size_t chunk_end = std::min(end, chunk_begin + chunk_elements);
      size_t pos = chunk_begin;
      while (pos < chunk_end) {
        // Skip tensors that end at or before pos (zero-sized ones included).
        while (tensors[tensor].offset + tensors[tensor].count <= pos) ++tensor;
        const size_t stop = std::min(chunk_end, tensors[tensor].offset + tensors[tensor].count);
        plan.blocks.push_back(Block{pos, stop - pos, tensor});
        pos = stop;
      }
    }
  }
  plan.segment_begin.push_back(plan.blocks.size());
  return plan;
}

}  // namespace threelc::engine
