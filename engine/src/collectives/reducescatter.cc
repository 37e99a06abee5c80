#include "collectives/reducescatter.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "collectives/chunking.h"
#include "collectives/reduce_ops.h"
#include "collectives/scratch_buffer.h"
#include "collectives/transfers.h"

namespace threelc::engine {

void reducescatter(transport::Context& context, std::span<const std::byte> input, ElementType type,
                   ReduceOp op, std::span<const size_t> elements_per_rank, std::span<std::byte> out,
                   const CollectiveOptions& options) {
  const int rank = context.rank();
  const int size = context.size();
  const auto n = static_cast<size_t>(size);
  const size_t element_bytes = element_size(type);
  if (element_bytes == 0 || static_cast<int>(op) >= kReduceOpCount) {
    throw std::invalid_argument("reducescatter: unknown element type " +
                                std::to_string(static_cast<int>(type)) + " or reduce op " +
                                std::to_string(static_cast<int>(op)));
  }
  if (elements_per_rank.size() != n) {
    throw std::invalid_argument("reducescatter: " + std::to_string(elements_per_rank.size()) +
                                " counts for " + std::to_string(size) + " ranks");
  }
  std::vector<size_t> offset(n + 1, 0);  // in bytes
  for (size_t q = 0; q < n; ++q) offset[q + 1] = offset[q] + elements_per_rank[q] * element_bytes;
  const auto self = static_cast<size_t>(rank);
  const size_t own_bytes = elements_per_rank[self] * element_bytes;
  if (input.size() != offset[n] || out.size() != own_bytes) {
    throw std::invalid_argument("reducescatter: input of " + std::to_string(input.size()) +
                                " bytes and output of " + std::to_string(out.size()) +
                                " bytes, the counts need " + std::to_string(offset[n]) + " and " +
                                std::to_string(own_bytes));
  }
  if (!input.empty() && !out.empty()) {
    const auto i = reinterpret_cast<uintptr_t>(input.data());
    const auto o = reinterpret_cast<uintptr_t>(out.data());
    if (i < o + out.size() && o < i + input.size()) {
      throw std::invalid_argument("reducescatter: output overlaps the input");
    }
  }
  const size_t chunk_bytes = detail::chunk_length(options, element_bytes, "reducescatter");
  const size_t chunks = detail::chunk_count(own_bytes, chunk_bytes);
  auto length = [&](size_t begin, size_t total) { return std::min(chunk_bytes, total - begin); };
  const std::span<const std::byte> own_part = input.subspan(offset[self], own_bytes);

  detail::Transfers transfers(context, options.observer,
                              "reducescatter rank " + std::to_string(rank));
  std::vector<ScratchBuffer<std::byte>> staging(n);  // [peer]: its part for this rank
  std::vector<std::vector<size_t>> ids(n);           // [peer][chunk]
  transfers.run([&] {
    for (int p = 0; p < size; ++p) {
      if (p == rank) continue;
      const auto pi = static_cast<size_t>(p);
      staging[pi].resize(own_bytes);
      for (size_t c = 0; c < chunks; ++c) {
        const size_t begin = c * chunk_bytes;
        ids[pi].push_back(transfers.receive(
            p, options.tag_base,
            std::span<std::byte>(staging[pi]).subspan(begin, length(begin, own_bytes)), 0));
      }
    }
    for (int d = 1; d < size; ++d) {
      const int j = (rank + d) % size;
      const auto ji = static_cast<size_t>(j);
      const size_t bytes = offset[ji + 1] - offset[ji];
      for (size_t begin = 0; begin < bytes; begin += chunk_bytes) {
        transfers.send(j, options.tag_base, input.subspan(offset[ji] + begin, length(begin, bytes)),
                       0);
      }
    }
    for (size_t c = 0; c < chunks; ++c) {
      const size_t begin = c * chunk_bytes;
      const size_t bytes = length(begin, own_bytes);
      for (int p = 0; p < size; ++p) {
        if (p != rank) transfers.wait(ids[static_cast<size_t>(p)][c]);
      }
      const int64_t start = detail::event_start(options.observer);
      auto part = [&](int p) -> const std::byte* {
        return p == rank ? own_part.data() + begin : staging[static_cast<size_t>(p)].data() + begin;
      };
      std::byte* acc = out.data() + begin;
      std::memcpy(acc, part(0), bytes);
      for (int p = 1; p < size; ++p) reduce_into(type, op, acc, part(p), bytes / element_bytes);
      detail::record_event(options.observer, Phase::kReduce, 0, start,
                           bytes * static_cast<size_t>(size - 1));
    }
  });
}

}  // namespace threelc::engine
