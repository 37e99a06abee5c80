// threelc-bench ring: per-link throughput of the transport around the ring. Run one process per
// rank with the THREELC_* environment (threelcrun, or by hand). Every rank sends a message to
// rank + 1 and receives one from rank - 1 at the same time; a hop's time is the time of one
// such iteration (all links busy at once), measured on rank 0 between control-channel barriers.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "threelc/transport/transport.h"

namespace {

namespace tt = threelc::transport;

constexpr const char* kHelp =
    R"(usage: threelc-bench ring [options]   (under threelcrun, or THREELC_* set)

Each rank sends a message of each size to the next rank and receives one from the previous
rank, simultaneously, for --iters iterations after one untimed warm-up. Rank 0 reports per size
the per-link throughput: GB/s = bytes / seconds of one hop (1 GB = 1e9 bytes), the mean over
the iterations (ranks synchronised by a barrier over the control channel before each size).

Options:
  --sizes LIST   message sizes in MiB, comma-separated (default 1,4,16,64,256)
  --iters N      timed iterations per size (default: enough to move 1 GiB, at least 5, so
                 that start-up and wake-up noise do not dominate small sizes)
  --one-way      only rank 0 sends (to rank 1) and only rank 1 receives: the pattern of an
                 iperf3 single stream, for comparing the transport itself with iperf3
  --json         rank 0 prints {"op":"ring","bytes":...,"gbps":...,"ranks":N,...} per line
  --help         this text
)";

void barrier(tt::Context& ctx) {
  std::byte token[1]{};
  constexpr uint32_t kUp = 0xB0, kDown = 0xB1;
  if (ctx.rank() == 0) {
    for (int peer = 1; peer < ctx.size(); ++peer) ctx.control(peer).recv(kUp, token).wait();
    for (int peer = 1; peer < ctx.size(); ++peer) ctx.control(peer).send(kDown, token).wait();
  } else {
    ctx.control(0).send(kUp, token).wait();
    ctx.control(0).recv(kDown, token).wait();
  }
}

}  // namespace

int run_ring_bench(int argc, char** argv) {
  std::vector<double> sizes_mib{1, 4, 16, 64, 256};
  int iters = 0;  // 0: per size, enough hops to move 1 GiB
  bool json = false;
  bool one_way = false;
  for (int i = 0; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(kHelp, stdout);
      return 0;
    } else if (arg == "--json") {
      json = true;
    } else if (arg == "--iters" && i + 1 < argc) {
      iters = std::atoi(argv[++i]);
    } else if (arg == "--one-way") {
      one_way = true;
    } else if (arg == "--sizes" && i + 1 < argc) {
      sizes_mib.clear();
      std::string list = argv[++i];
      for (size_t at = 0; at <= list.size();) {
        const size_t comma = std::min(list.find(',', at), list.size());
        sizes_mib.push_back(std::atof(list.substr(at, comma - at).c_str()));
        at = comma + 1;
      }
    } else {
      std::fprintf(stderr, "threelc-bench ring: unknown option '%s'\n%s", argv[i], kHelp);
      return 2;
    }
  }
  try {
    auto ctx = tt::connect(tt::options_from_environment());
    const int rank = ctx->rank(), size = ctx->size();
    if (size < 2) {
      std::fprintf(stderr, "threelc-bench ring: needs at least 2 ranks (THREELC_SIZE)\n");
      return 2;
    }
    const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    if (rank == 0 && !json) std::printf("%12s %8s %10s %8s\n", "bytes", "iters", "GB/s", "ranks");
    for (const double mib : sizes_mib) {
      const auto bytes = static_cast<size_t>(mib * 1024 * 1024);
      std::vector<std::byte> out(bytes, std::byte{1}), in(bytes);
      auto hop = [&] {
        if (one_way) {
          if (rank == 0) ctx->pair(1).send(7, out).wait();
          if (rank == 1) ctx->pair(0).recv(7, in).wait();
          return;
        }
        auto r = ctx->pair(prev).recv(7, in);
        auto s = ctx->pair(next).send(7, out);
        s.wait();
        r.wait();
      };
      barrier(*ctx);
      hop();  // warm-up
      barrier(*ctx);
      const auto start = std::chrono::steady_clock::now();
      const int hops =
          iters > 0 ? iters
                    : std::max(5, static_cast<int>((size_t{1} << 30) / std::max<size_t>(bytes, 1)));
      for (int i = 0; i < hops; ++i) hop();
      barrier(*ctx);
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / hops;
      const double gbps = static_cast<double>(bytes) / seconds / 1e9;
      if (rank != 0) continue;
      if (json) {
        std::printf(
            "{\"op\":\"%s\",\"bytes\":%zu,\"gbps\":%.3f,\"ranks\":%d,\"iters\":%d,"
            "\"seconds_per_hop\":%.6f}\n",
            one_way ? "one_way" : "ring", bytes, gbps, size, hops, seconds);
      } else {
        std::printf("%12zu %8d %10.3f %8d\n", bytes, hops, gbps, size);
      }
      std::fflush(stdout);
    }
    barrier(*ctx);
    return 0;
  } catch (const tt::Error& e) {
    std::fprintf(stderr, "threelc-bench ring: %s\n", e.what());
    return 1;
  }
}
