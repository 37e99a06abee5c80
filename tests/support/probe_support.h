// What the engine's job probes (push_pull_probe, collectives_probe) share: the output hash they
// print, the malformed-message modes (rank 1 sends rank 0 one bad message, rank 0 must get a
// CollectiveError naming rank 1), and main()'s exit statuses.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <span>
#include <thread>
#include <vector>

#include "collectives/collective_error.h"
#include "threelc/transport/transport.h"

namespace threelc::test_support {

// FNV-1a 64 of `bytes`: the hash the probes print in their "HASH " lines.
inline uint64_t fnv1a(std::span<const std::byte> bytes) {
  uint64_t h = 1469598103934665603ull;
  for (const std::byte b : bytes) {
    h ^= static_cast<uint64_t>(b);
    h *= 1099511628211ull;
  }
  return h;
}

// Rank 1 sends rank 0 `garbage_bytes` bytes of 0xFF with `tag` on their data pair and returns 0.
// Rank 0 runs `collective` (which must receive that message first) and must get a
// CollectiveError naming rank 1: it prints "ERROR <peer> <message>" and returns 0 when the peer
// is 1, else 2; 2 too when the bad message was accepted.
template <typename Collective>
int expect_error_from_rank1(transport::Context& ctx, uint32_t tag, size_t garbage_bytes,
                            const char* probe, Collective&& collective) {
  if (ctx.rank() == 1) {
    const std::vector<std::byte> garbage(garbage_bytes, std::byte{0xFF});
    ctx.pair(0).send(tag, garbage).wait();
    std::this_thread::sleep_for(std::chrono::seconds(1));
    return 0;
  }
  try {
    collective();
  } catch (const engine::CollectiveError& e) {
    std::printf("ERROR %d %s\n", e.peer(), e.what());
    return e.peer() == 1 ? 0 : 2;
  }
  std::fprintf(stderr, "%s: a bad message was accepted\n", probe);
  return 2;
}

// Runs a probe's `body` and returns its exit status: body's own, or 1 for a transport::Error,
// 3 for any other exception (each reported on stderr, prefixed with `probe`).
template <typename Body>
int probe_main(const char* probe, Body&& body) {
  try {
    const int status = body();
    std::fflush(stdout);
    return status;
  } catch (const transport::Error& e) {
    std::fprintf(stderr, "%s: transport error (peer %d): %s\n", probe, e.peer(), e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", probe, e.what());
    return 3;
  }
}

}  // namespace threelc::test_support
