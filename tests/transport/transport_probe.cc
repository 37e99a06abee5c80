// transport_probe: joins a job through options_from_environment() and checks every channel:
// messages both ways with every peer (sizes 0 B .. 3 MiB, several in flight, tags received out
// of order, several messages of one tag in order), one hop around the ring, and a round trip
// with the coordinator over control(). Exit status: 0 all verified, 1 transport Error (printed
// to stderr), 2 content mismatch.
//
// THREELC_PROBE_MODE (test only): "check" (default); "kill" (2 ranks: rank 1 streams 64 MiB
// messages to rank 0 and SIGKILLs itself mid-stream; rank 0 receives until the error);
// "truncate" (2 ranks: rank 1 sends rank 0 messages longer than its receives, one that arrives
// before the receive is posted and one after; rank 0 prints each error as "truncated: ..." and
// then checks that the pair still carries a message); "idle" (2 ranks: rank 0 posts a 16 MiB
// receive from rank 1 and a 16 MiB send to it, which rank 1 matches only after 2 s; rank 0
// prints "idle: waited W s, cpu C s", its process's CPU time over the wait); "chain" (3 ranks:
// rank 2 says hello to both others and stops itself with SIGSTOP; rank 0 waits for a message
// from rank 1 at once, rank 1 for one from rank 2 only after THREELC_PROBE_CHAIN_DELAY_MS; each
// prints "chain: ERROR after S s: <message>" and stops its context with it, as the engine does);
// "deadlock" (2 ranks: each waits for a message the other never sends, and prints the same).
// THREELC_PROBE_DELAY_MS: sleep before joining; THREELC_PROBE_LINGER_MS: sleep before exiting.
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "threelc/transport/transport.h"

namespace tt = threelc::transport;

namespace {

std::byte pattern(int from, int to, uint32_t tag, size_t i) {
  return static_cast<std::byte>((static_cast<size_t>(from) * 131 + static_cast<size_t>(to) * 31 +
                                 size_t{tag} * 7 + i * 13 + (i >> 11)) &
                                0xFF);
}

std::vector<std::byte> message(int from, int to, uint32_t tag, size_t n) {
  std::vector<std::byte> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = pattern(from, to, tag, i);
  return out;
}

bool verify(const std::vector<std::byte>& got, size_t n, int from, int to, uint32_t tag,
            const char* what) {
  for (size_t i = 0; i < n; ++i) {
    if (got[i] != pattern(from, to, tag, i)) {
      std::fprintf(stderr, "transport_probe rank %d: %s from rank %d tag %u: byte %zu differs\n",
                   to, what, from, tag, i);
      return false;
    }
  }
  return true;
}

int check(tt::Context& ctx) {
  const int rank = ctx.rank();
  const int size = ctx.size();
  const size_t sizes[] = {0, 1, 4093, 65536, 3 << 20};
  constexpr int kSizes = 5;
  struct Out {
    std::vector<std::byte> data;
    tt::Request request;
  };
  struct In {
    int from;
    uint32_t tag;
    size_t n;
    std::vector<std::byte> data;
    tt::Request request;
  };
  std::vector<Out> outs;
  std::vector<In> ins;
  outs.reserve(static_cast<size_t>(size) * 8);
  ins.reserve(static_cast<size_t>(size) * 8);
  bool ok = true;
  // Receives for the larger sizes are posted before the sends (zero-copy path), in reverse tag
  // order; the smaller ones after (staging path).
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    for (int i = kSizes - 1; i >= 3; --i) {
      const uint32_t tag = 100 + static_cast<uint32_t>(i);
      auto& in =
          ins.emplace_back(In{peer, tag, sizes[i], std::vector<std::byte>(sizes[i] + 5), {}});
      in.request = ctx.pair(peer).recv(tag, in.data);
    }
  }
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    for (int i = 0; i < kSizes; ++i) {
      const uint32_t tag = 100 + static_cast<uint32_t>(i);
      auto& out = outs.emplace_back(Out{message(rank, peer, tag, sizes[i]), {}});
      out.request = ctx.pair(peer).send(tag, out.data);
    }
    // Three messages of one tag: matched in order.
    for (size_t k = 0; k < 3; ++k) {
      auto& out = outs.emplace_back(Out{message(rank, peer, 7, 1000 + k), {}});
      out.request = ctx.pair(peer).send(7, out.data);
    }
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    for (int i = 2; i >= 0; --i) {
      const uint32_t tag = 100 + static_cast<uint32_t>(i);
      auto& in = ins.emplace_back(In{peer, tag, sizes[i], std::vector<std::byte>(sizes[i]), {}});
      in.request = ctx.pair(peer).recv(tag, in.data);
    }
    for (size_t k = 0; k < 3; ++k) {
      auto& in = ins.emplace_back(In{peer, 7, 1000 + k, std::vector<std::byte>(2000), {}});
      in.request = ctx.pair(peer).recv(7, in.data);
    }
  }
  for (auto& out : outs) out.request.wait();
  for (auto& in : ins) {
    const size_t got = in.request.wait();
    if (got != in.n) {
      std::fprintf(stderr, "transport_probe rank %d: %zu bytes from rank %d tag %u, expected %zu\n",
                   rank, got, in.from, in.tag, in.n);
      ok = false;
    }
    ok = verify(in.data, in.n, in.from, rank, in.tag, "pair message") && ok;
  }

  // Around the ring.
  if (size > 1) {
    const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    auto out = message(rank, next, 999, 1 << 20);
    std::vector<std::byte> in(1 << 20);
    auto r = ctx.pair(prev).recv(999, in);
    auto s = ctx.pair(next).send(999, out);
    s.wait();
    r.wait();
    ok = verify(in, in.size(), prev, rank, 999, "ring message") && ok;

    // Control round trip with the coordinator.
    if (rank == 0) {
      for (int peer = 1; peer < size; ++peer) {
        auto ping = message(0, peer, 5, 300);
        ctx.control(peer).send(5, ping).wait();
      }
      for (int peer = 1; peer < size; ++peer) {
        std::vector<std::byte> pong(300);
        ctx.control(peer).recv(6, pong).wait();
        ok = verify(pong, pong.size(), peer, 0, 6, "control reply") && ok;
      }
    } else {
      std::vector<std::byte> ping(300);
      ctx.control(0).recv(5, ping).wait();
      ok = verify(ping, ping.size(), 0, rank, 5, "control message") && ok;
      auto pong = message(rank, 0, 6, 300);
      ctx.control(0).send(6, pong).wait();
      // Wait for the coordinator's last word so nobody exits while others still need it.
    }
    // Final barrier over control: everyone reports, rank 0 releases.
    std::byte token[1]{};
    if (rank == 0) {
      for (int peer = 1; peer < size; ++peer) ctx.control(peer).recv(8, token).wait();
      for (int peer = 1; peer < size; ++peer) ctx.control(peer).send(9, token).wait();
    } else {
      ctx.control(0).send(8, token).wait();
      ctx.control(0).recv(9, token).wait();
    }
  }
  return ok ? 0 : 2;
}

int kill_mode(tt::Context& ctx) {
  std::vector<std::byte> buffer(64 << 20);
  if (ctx.rank() == 1) {
    std::thread killer([] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      ::kill(::getpid(), SIGKILL);
    });
    for (;;) ctx.pair(0).send(1, buffer).wait();
  }
  for (;;) ctx.pair(1).recv(1, buffer).wait();
}

int truncate_mode(tt::Context& ctx) {
  // Tag 3: 5000 bytes, sent before rank 0 posts its receive; tag 4: 3 MiB, posted first.
  std::vector<std::byte> small(1000);
  std::byte token[1]{};
  if (ctx.rank() == 1) {
    auto early = message(1, 0, 3, 5000);
    auto late = message(1, 0, 4, 3 << 20);
    auto after = message(1, 0, 5, 300);
    ctx.pair(0).send(3, early).wait();
    ctx.control(0).recv(8, token).wait();  // rank 0 posted tag 4's receive
    ctx.pair(0).send(4, late).wait();
    ctx.pair(0).send(5, after).wait();
    ctx.control(0).recv(9, token).wait();
    return 0;
  }
  int status = 0;
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  for (const uint32_t tag : {3u, 4u}) {
    auto request = ctx.pair(1).recv(tag, small);
    if (tag == 4) ctx.control(1).send(8, token).wait();
    try {
      request.wait();
      std::fprintf(stderr, "transport_probe rank 0: tag %u: no error\n", tag);
      status = 2;
    } catch (const tt::Error& e) {
      std::printf("truncated: peer %d: %s\n", e.peer(), e.what());
    }
  }
  std::vector<std::byte> after(300);
  if (ctx.pair(1).recv(5, after).wait() != after.size() ||
      !verify(after, after.size(), 1, 0, 5, "message after the truncated ones")) {
    status = 2;
  }
  ctx.control(1).send(9, token).wait();
  return status;
}

double process_cpu_seconds() {
  timespec now{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

int idle_mode(tt::Context& ctx) {
  constexpr size_t kBytes = size_t{16} << 20;
  const int peer = 1 - ctx.rank();
  auto outgoing = message(ctx.rank(), peer, 2 - static_cast<uint32_t>(ctx.rank()), kBytes);
  std::vector<std::byte> incoming(kBytes);
  const uint32_t send_tag = ctx.rank() == 0 ? 2 : 1;
  const uint32_t recv_tag = ctx.rank() == 0 ? 1 : 2;
  if (ctx.rank() == 1) std::this_thread::sleep_for(std::chrono::seconds(2));
  const auto started = std::chrono::steady_clock::now();
  const double cpu_started = process_cpu_seconds();
  auto received = ctx.pair(peer).recv(recv_tag, incoming);
  auto sent = ctx.pair(peer).send(send_tag, outgoing);
  sent.wait();
  const size_t n = received.wait();
  const double cpu = process_cpu_seconds() - cpu_started;
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (n != kBytes || !verify(incoming, n, peer, ctx.rank(), recv_tag, "idle-mode message"))
    return 2;
  if (ctx.rank() == 0) std::printf("idle: waited %.3f s, cpu %.3f s\n", waited, cpu);
  return 0;
}

// Waits for a message `from` never sends; prints how that wait ended.
int wait_for_nothing(tt::Context& ctx, int from, uint32_t tag) {
  std::vector<std::byte> buffer(16);
  const auto started = std::chrono::steady_clock::now();
  try {
    ctx.pair(from).recv(tag, buffer).wait();
  } catch (const tt::Error& e) {
    const double took =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    std::printf("chain: ERROR after %.2f s: %s\n", took, e.what());
    std::fflush(stdout);
    ctx.stop(e.what());
    return 1;
  }
  return 0;
}

int chain_mode(tt::Context& ctx) {
  constexpr uint32_t kHello = 8;
  constexpr uint32_t kNever = 9;
  std::vector<std::byte> buffer(16);
  if (ctx.rank() == 2) {
    ctx.pair(0).send(kHello, buffer).wait();
    ctx.pair(1).send(kHello, buffer).wait();
    std::fflush(stdout);
    raise(SIGSTOP);  // the test SIGKILLs it
    return 0;
  }
  ctx.pair(2).recv(kHello, buffer).wait();
  int from = 1;
  if (ctx.rank() == 1) {
    const char* delay = std::getenv("THREELC_PROBE_CHAIN_DELAY_MS");
    std::this_thread::sleep_for(std::chrono::milliseconds(delay ? std::atoi(delay) : 2000));
    from = 2;
  }
  return wait_for_nothing(ctx, from, kNever);
}

}  // namespace

int main() {
  int rank = -1;
  try {
    if (const char* delay = std::getenv("THREELC_PROBE_DELAY_MS")) {
      std::this_thread::sleep_for(std::chrono::milliseconds(std::atoi(delay)));
    }
    const auto options = tt::options_from_environment();
    rank = options.rank;
    auto ctx = tt::connect(options);
    const char* mode = std::getenv("THREELC_PROBE_MODE");
    if (mode != nullptr && std::strcmp(mode, "kill") == 0) return kill_mode(*ctx);
    if (mode != nullptr && std::strcmp(mode, "chain") == 0) return chain_mode(*ctx);
    if (mode != nullptr && std::strcmp(mode, "deadlock") == 0) {
      return wait_for_nothing(*ctx, 1 - ctx->rank(), 9);
    }
    if (mode != nullptr && std::strcmp(mode, "idle") == 0) {
      const int status = idle_mode(*ctx);
      std::fflush(stdout);
      return status;
    }
    if (mode != nullptr && std::strcmp(mode, "truncate") == 0) {
      const int status = truncate_mode(*ctx);
      std::fflush(stdout);
      return status;
    }
    const int status = check(*ctx);
    if (status == 0) std::printf("transport_probe rank %d of %d: ok\n", rank, ctx->size());
    std::fflush(stdout);
    if (const char* linger = std::getenv("THREELC_PROBE_LINGER_MS")) {
      std::this_thread::sleep_for(std::chrono::milliseconds(std::atoi(linger)));
    }
    return status;
  } catch (const tt::Error& e) {
    std::fprintf(stderr, "transport_probe rank %d: ERROR (peer %d): %s\n", rank, e.peer(),
                 e.what());
    return 1;
  }
}
