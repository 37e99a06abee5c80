#include "collectives/alltoall.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "collectives/chunking.h"
#include "collectives/transfers.h"

namespace threelc::engine {

namespace {

// Byte offsets of the parts: offsets[q] .. offsets[q + 1] is part q.
std::vector<size_t> offsets_of(std::span<const size_t> sizes) {
  std::vector<size_t> offsets(sizes.size() + 1, 0);
  for (size_t q = 0; q < sizes.size(); ++q) offsets[q + 1] = offsets[q] + sizes[q];
  return offsets;
}

}  // namespace

void alltoallv(transport::Context& context, std::span<const std::byte> input,
               std::span<const size_t> send_bytes, std::span<std::byte> out,
               std::span<const size_t> recv_bytes, const CollectiveOptions& options) {
  const int rank = context.rank();
  const int size = context.size();
  const auto n = static_cast<size_t>(size);
  if (send_bytes.size() != n || recv_bytes.size() != n) {
    throw std::invalid_argument("alltoallv: " + std::to_string(send_bytes.size()) + " send and " +
                                std::to_string(recv_bytes.size()) + " receive sizes for " +
                                std::to_string(size) + " ranks");
  }
  const std::vector<size_t> send_at = offsets_of(send_bytes);
  const std::vector<size_t> recv_at = offsets_of(recv_bytes);
  if (input.size() != send_at[n] || out.size() != recv_at[n]) {
    throw std::invalid_argument("alltoallv: input of " + std::to_string(input.size()) +
                                " bytes and output of " + std::to_string(out.size()) +
                                " bytes, the sizes add up to " + std::to_string(send_at[n]) +
                                " and " + std::to_string(recv_at[n]));
  }
  const auto self = static_cast<size_t>(rank);
  if (send_bytes[self] != recv_bytes[self]) {
    throw std::invalid_argument("alltoallv: rank " + std::to_string(rank) + " sends itself " +
                                std::to_string(send_bytes[self]) + " bytes but expects " +
                                std::to_string(recv_bytes[self]));
  }
  if (!input.empty() && !out.empty()) {
    const auto i = reinterpret_cast<uintptr_t>(input.data());
    const auto o = reinterpret_cast<uintptr_t>(out.data());
    if (i < o + out.size() && o < i + input.size()) {
      throw std::invalid_argument("alltoallv: output overlaps the input");
    }
  }
  const size_t chunk_bytes = detail::chunk_length(options, 1, "alltoallv");
  detail::Transfers transfers(context, options.observer, "alltoallv rank " + std::to_string(rank));
  transfers.run([&] {
    std::vector<size_t> ids;
    for (int d = 1; d < size; ++d) {
      const int p = (rank + size - d) % size;
      const auto pi = static_cast<size_t>(p);
      for (size_t begin = 0; begin < recv_bytes[pi]; begin += chunk_bytes) {
        ids.push_back(transfers.receive(
            p, options.tag_base,
            out.subspan(recv_at[pi] + begin, std::min(chunk_bytes, recv_bytes[pi] - begin)), 0));
      }
    }
    for (int d = 1; d < size; ++d) {
      const int j = (rank + d) % size;
      const auto ji = static_cast<size_t>(j);
      for (size_t begin = 0; begin < send_bytes[ji]; begin += chunk_bytes) {
        transfers.send(
            j, options.tag_base,
            input.subspan(send_at[ji] + begin, std::min(chunk_bytes, send_bytes[ji] - begin)), 0);
      }
    }
    if (send_bytes[self] != 0) {
      const int64_t begin = detail::event_start(options.observer);
      std::memcpy(out.data() + recv_at[self], input.data() + send_at[self], send_bytes[self]);
      detail::record_event(options.observer, Phase::kCopy, 0, begin, send_bytes[self]);
    }
    for (const size_t id : ids) transfers.wait(id);
  });
}

}  // namespace threelc::engine
