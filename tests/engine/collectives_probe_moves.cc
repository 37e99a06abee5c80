// The collectives probe's cases of broadcast, allgatherv, reducescatter and alltoallv: exact
// bytes against what every rank computes for every rank (collectives_probe.cc runs them).
#include "collectives_probe.h"

namespace collectives_probe {

// --- broadcast, allgatherv, reducescatter, alltoallv ---------------------------------------------

Bytes pattern(uint64_t salt, int rank, size_t count) {
  Bytes out(count);
  for (size_t i = 0; i < count; ++i) out[i] = static_cast<std::byte>(noise(salt, rank, i) & 0xFF);
  return out;
}

void broadcast_cases(tt::Context& ctx) {
  for (const size_t bytes : {size_t{0}, size_t{1}, size_t{100003}}) {
    for (int root = 0; root < ctx.size(); ++root) {
      const std::string name =
          "broadcast/" + std::to_string(bytes) + "/root" + std::to_string(root);
      Bytes data = pattern(bytes, ctx.rank(), bytes);
      te::CollectiveOptions options;
      options.chunk_bytes = 4096;
      te::broadcast(ctx, data, root, options);
      print_hash(name, data);
      expect_bytes(name, data, pattern(bytes, root, bytes));
    }
  }
}

void allgather_cases(tt::Context& ctx) {
  const int n = ctx.size();
  const std::vector<std::vector<size_t>> layouts = {
      [&] {
        std::vector<size_t> s;
        s.reserve(static_cast<size_t>(n));
        for (int q = 0; q < n; ++q) s.push_back(q % 3 == 1 ? 0 : 1000 * static_cast<size_t>(q) + 7);
        return s;
      }(),
      std::vector<size_t>(static_cast<size_t>(n), 0),
      std::vector<size_t>(static_cast<size_t>(n), 3),
  };
  for (size_t l = 0; l < layouts.size(); ++l) {
    const auto& sizes = layouts[l];
    const std::string name = "allgatherv/" + std::to_string(l);
    Bytes want;
    for (int q = 0; q < n; ++q) {
      const Bytes piece = pattern(l, q, sizes[static_cast<size_t>(q)]);
      want.insert(want.end(), piece.begin(), piece.end());
    }
    const Bytes mine = pattern(l, ctx.rank(), sizes[static_cast<size_t>(ctx.rank())]);
    Bytes out(want.size(), std::byte{0xEE});
    te::CollectiveOptions options;
    options.chunk_bytes = 512;
    te::allgatherv(ctx, mine, out, sizes, options);
    print_hash(name, out);
    expect_bytes(name, out, want);
  }
}

void reducescatter_case(tt::Context& ctx, te::ElementType type, te::ReduceOp op,
                        size_t chunk_bytes) {
  const int n = ctx.size();
  const int rank = ctx.rank();
  const std::string name = std::string("reducescatter/") + te::element_type_name(type) + "/" +
                           te::reduce_op_name(op) + "/chunk" + std::to_string(chunk_bytes);
  std::vector<size_t> counts;
  size_t total = 0;
  for (int q = 0; q < n; ++q) {
    counts.push_back(q % 3 == 1 ? 0 : 1000 + 17 * static_cast<size_t>(q));
    total += counts.back();
  }
  const size_t es = te::element_size(type);
  size_t first = 0;
  for (int q = 0; q < rank; ++q) first += counts[static_cast<size_t>(q)];
  const size_t mine = counts[static_cast<size_t>(rank)];
  const uint64_t salt = ts::fnv1a(std::as_bytes(std::span<const char>(name.data(), name.size())));
  Bytes want = values(type, salt, 0, total);
  for (int r = 1; r < n; ++r) {
    const Bytes in = values(type, salt, r, total);
    te::reduce_into(type, op, want.data(), in.data(), total);
  }
  const Bytes input = values(type, salt, rank, total);
  Bytes out(mine * es);
  te::CollectiveOptions options;
  options.chunk_bytes = chunk_bytes;
  te::reducescatter(ctx, input, type, op, counts, out, options);
  expect_bytes(name, out, std::span<const std::byte>(want).subspan(first * es, mine * es));
}

void alltoall_cases(tt::Context& ctx) {
  const int n = ctx.size();
  const int rank = ctx.rank();
  auto part = [](int from, int to) -> size_t {
    return (from + 2 * to) % 3 == 0
               ? 0
               : 100 * static_cast<size_t>(from + 1) + 31 * static_cast<size_t>(to);
  };
  auto content = [](int from, int to, size_t bytes) {
    return pattern(static_cast<uint64_t>(to) * 1000 + 77, from, bytes);
  };
  std::vector<size_t> send, recv;
  Bytes input, want;
  for (int q = 0; q < n; ++q) {
    send.push_back(part(rank, q));
    recv.push_back(part(q, rank));
    const Bytes out_part = content(rank, q, send.back());
    input.insert(input.end(), out_part.begin(), out_part.end());
    const Bytes in_part = content(q, rank, recv.back());
    want.insert(want.end(), in_part.begin(), in_part.end());
  }
  Bytes out(want.size());
  te::CollectiveOptions options;
  options.chunk_bytes = 64;
  te::alltoallv(ctx, input, send, out, recv, options);
  expect_bytes("alltoallv", out, want);
}

}  // namespace collectives_probe
