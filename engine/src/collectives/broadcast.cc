#include "collectives/broadcast.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "collectives/chunking.h"
#include "collectives/transfers.h"

namespace threelc::engine {

void broadcast(transport::Context& context, std::span<std::byte> data, int root,
               const CollectiveOptions& options) {
  const int rank = context.rank();
  const int size = context.size();
  if (root < 0 || root >= size) {
    throw std::invalid_argument("broadcast: root " + std::to_string(root) + " is not a rank of " +
                                std::to_string(size));
  }
  const size_t chunk_bytes = detail::chunk_length(options, 1, "broadcast");
  if (size == 1 || data.empty()) return;
  const int next = (rank + 1) % size;
  const int prev = (rank + size - 1) % size;
  const size_t chunks = detail::chunk_count(data.size(), chunk_bytes);
  auto chunk = [&](size_t c) {
    const size_t offset = c * chunk_bytes;
    return data.subspan(offset, std::min(chunk_bytes, data.size() - offset));
  };
  detail::Transfers transfers(context, options.observer, "broadcast rank " + std::to_string(rank));
  transfers.run([&] {
    if (rank == root) {
      for (size_t c = 0; c < chunks; ++c) transfers.send(next, options.tag_base, chunk(c), 0);
      return;
    }
    std::vector<size_t> ids(chunks);
    for (size_t c = 0; c < chunks; ++c)
      ids[c] = transfers.receive(prev, options.tag_base, chunk(c), 0);
    for (size_t c = 0; c < chunks; ++c) {
      transfers.wait(ids[c]);
      if (next != root) transfers.send(next, options.tag_base, chunk(c), 0);
    }
  });
}

}  // namespace threelc::engine
