#include "collectives/allgather.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "collectives/chunking.h"
#include "collectives/transfers.h"

namespace threelc::engine {

void allgatherv(transport::Context& context, std::span<const std::byte> mine,
                std::span<std::byte> out, std::span<const size_t> bytes_per_rank,
                const CollectiveOptions& options) {
  const int rank = context.rank();
  const int size = context.size();
  const auto n = static_cast<size_t>(size);
  if (bytes_per_rank.size() != n) {
    throw std::invalid_argument("allgatherv: " + std::to_string(bytes_per_rank.size()) +
                                " sizes for " + std::to_string(size) + " ranks");
  }
  std::vector<size_t> offset(n + 1, 0);
  for (size_t q = 0; q < n; ++q) offset[q + 1] = offset[q] + bytes_per_rank[q];
  const auto self = static_cast<size_t>(rank);
  if (mine.size() != bytes_per_rank[self]) {
    throw std::invalid_argument("allgatherv: rank " + std::to_string(rank) + " passes " +
                                std::to_string(mine.size()) + " bytes, its size says " +
                                std::to_string(bytes_per_rank[self]));
  }
  if (out.size() != offset[n]) {
    throw std::invalid_argument("allgatherv: output of " + std::to_string(out.size()) +
                                " bytes, the pieces add up to " + std::to_string(offset[n]));
  }
  const std::span<std::byte> own = out.subspan(offset[self], mine.size());
  const bool in_place = own.data() == mine.data();
  if (!in_place && !mine.empty() && !out.empty()) {
    const auto m = reinterpret_cast<uintptr_t>(mine.data());
    const auto o = reinterpret_cast<uintptr_t>(out.data());
    if (m < o + out.size() && o < m + mine.size()) {
      throw std::invalid_argument("allgatherv: input overlaps the output outside its own piece");
    }
  }
  const size_t chunk_bytes = detail::chunk_length(options, 1, "allgatherv");
  const int next = (rank + 1) % size;
  const int prev = (rank + size - 1) % size;
  auto chunk = [&](int q, size_t c) {
    const auto qi = static_cast<size_t>(q);
    const size_t begin = c * chunk_bytes;
    return out.subspan(offset[qi] + begin, std::min(chunk_bytes, bytes_per_rank[qi] - begin));
  };
  detail::Transfers transfers(context, options.observer, "allgatherv rank " + std::to_string(rank));
  transfers.run([&] {
    // Pieces arrive from the predecessor in the order it sends them: its own, then the ones it
    // forwards, nearest origin first.
    std::vector<std::vector<size_t>> ids(n);
    for (int d = 1; d < size; ++d) {
      const int q = (rank + size - d) % size;
      const auto qi = static_cast<size_t>(q);
      for (size_t c = 0; c < detail::chunk_count(bytes_per_rank[qi], chunk_bytes); ++c) {
        ids[qi].push_back(transfers.receive(prev, options.tag_base, chunk(q, c), 0));
      }
    }
    if (size > 1) {
      for (size_t begin = 0; begin < mine.size(); begin += chunk_bytes) {
        transfers.send(next, options.tag_base,
                       mine.subspan(begin, std::min(chunk_bytes, mine.size() - begin)), 0);
      }
    }
    if (!in_place && !mine.empty()) {
      const int64_t begin = detail::event_start(options.observer);
      std::memcpy(own.data(), mine.data(), mine.size());
      detail::record_event(options.observer, Phase::kCopy, 0, begin, mine.size());
    }
    for (int d = 1; d < size; ++d) {
      const int q = (rank + size - d) % size;
      const auto& chunk_ids = ids[static_cast<size_t>(q)];
      for (size_t c = 0; c < chunk_ids.size(); ++c) {
        transfers.wait(chunk_ids[c]);
        if (next != q) transfers.send(next, options.tag_base, chunk(q, c), 0);
      }
    }
  });
}

}  // namespace threelc::engine
