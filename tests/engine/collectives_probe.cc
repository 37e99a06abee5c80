// collectives_probe: joins a job through options_from_environment() and runs the engine's
// collectives besides push_pull (allreduce_raw, ring_allreduce_sum, broadcast, allgatherv,
// reducescatter, alltoallv). Every rank generates every rank's input, so it checks its own
// output against a reference it computes itself:
// - allreduce_raw and reducescatter: bitwise equal to the rank-order fold x0 op x1 op ... (made
//   with reduce_into) for every element type and op, NaN and inf included;
// - ring_allreduce_sum uncompressed: the exact sums (small integers); compressed: the first
//   iteration within first_bound() of the exact sums and the accumulated drift within
//   drift_bound() (a bound that does not grow with iterations);
// - broadcast, allgatherv, alltoallv: the exact bytes;
// - with an observer: the send and receive bytes of allreduce_raw are what the algorithm moves.
// For every output that is the same on every rank it prints "HASH <case> <fnv1a-64>"
// (collectives_test checks that every rank prints the same lines). Exit status: 0 all verified, 1
// transport Error, 2 mismatch, 3 any other exception.
//
// THREELC_PROBE_MODE (test only, 2 ranks): "short_raw": rank 1 sends rank 0 a 10-byte push
// chunk; "garbage_ring": rank 1 sends rank 0 a garbage reduce-scatter block. Rank 0 must get a
// CollectiveError naming rank 1 (printed as "ERROR <peer> <message>").
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "collectives/allgather.h"
#include "collectives/alltoall.h"
#include "collectives/broadcast.h"
#include "collectives/push_pull.h"
#include "collectives/raw_allreduce.h"
#include "collectives/reduce_ops.h"
#include "collectives/reducescatter.h"
#include "collectives/ring_allreduce.h"
#include "element_type.h"
#include "error_feedback.h"
#include "probe_support.h"
#include "threelc/transport/transport.h"

namespace te = threelc::engine;
namespace tt = threelc::transport;
namespace ts = threelc::test_support;

namespace {

using Bytes = std::vector<std::byte>;

// A mismatch: the probe prints it and exits 2.
struct Mismatch {
  std::string what;
};

uint64_t mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

uint64_t noise(uint64_t salt, int rank, size_t i) {
  return mix(mix(salt) ^ (static_cast<uint64_t>(rank) << 48) ^ i);
}

void print_hash(const std::string& name, std::span<const std::byte> bytes) {
  std::printf("HASH %s %016llx\n", name.c_str(), static_cast<unsigned long long>(ts::fnv1a(bytes)));
}

void expect_bytes(const std::string& name, std::span<const std::byte> got,
                  std::span<const std::byte> want) {
  if (got.size() != want.size()) {
    throw Mismatch{name + ": " + std::to_string(got.size()) + " bytes, expected " +
                   std::to_string(want.size())};
  }
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] != want[i]) {
      throw Mismatch{name + ": byte " + std::to_string(i) + " is " +
                     std::to_string(static_cast<int>(got[i])) + ", expected " +
                     std::to_string(static_cast<int>(want[i]))};
    }
  }
}

template <typename T>
void put(Bytes& out, size_t i, T v) {
  std::memcpy(out.data() + i * sizeof(T), &v, sizeof(T));
}

// `count` values of `type` for `rank`: random integers (sums and products wrap), floats of
// [-15.6, 15.6] in steps of 1/64 with a NaN, inf or -inf here and there.
Bytes values(te::ElementType type, uint64_t salt, int rank, size_t count) {
  Bytes out(count * te::element_size(type));
  for (size_t i = 0; i < count; ++i) {
    const uint64_t h = noise(salt, rank, i);
    double v = static_cast<double>(static_cast<int64_t>(h % 2001) - 1000) / 64.0;
    if (h % 211 == 0) v = std::nan("");
    if (h % 223 == 0) v = INFINITY;
    if (h % 227 == 0) v = -INFINITY;
    const auto f = static_cast<float>(v);
    switch (type) {
      case te::ElementType::kUint8:
      case te::ElementType::kInt8:
        put(out, i, static_cast<uint8_t>(h >> 7));
        break;
      case te::ElementType::kBool:  // moved only (kTypes, the reduced types, leave it out)
        put(out, i, static_cast<uint8_t>((h >> 7) & 1));
        break;
      case te::ElementType::kInt16:
        put(out, i, static_cast<uint16_t>(h >> 5));
        break;
      case te::ElementType::kInt32:
        put(out, i, static_cast<uint32_t>(h >> 3));
        break;
      case te::ElementType::kInt64:
        put(out, i, h);
        break;
      case te::ElementType::kFloat16:
        put(out, i, te::float_to_half(f));
        break;
      case te::ElementType::kBFloat16:
        put(out, i, te::float_to_bfloat16(f));
        break;
      case te::ElementType::kFloat32:
        put(out, i, f);
        break;
      case te::ElementType::kFloat64:
        put(out, i, v);
        break;
    }
  }
  return out;
}

constexpr te::ElementType kTypes[] = {
    te::ElementType::kUint8,   te::ElementType::kInt8,    te::ElementType::kInt32,
    te::ElementType::kInt64,   te::ElementType::kFloat16, te::ElementType::kBFloat16,
    te::ElementType::kFloat32, te::ElementType::kFloat64, te::ElementType::kInt16};
constexpr te::ReduceOp kOps[] = {te::ReduceOp::kSum, te::ReduceOp::kAverage, te::ReduceOp::kMin,
                                 te::ReduceOp::kMax, te::ReduceOp::kProduct};

std::vector<te::TensorSlice> layout(const std::string& prefix, const std::vector<size_t>& sizes) {
  std::vector<te::TensorSlice> tensors;
  size_t offset = 0;
  for (size_t t = 0; t < sizes.size(); ++t) {
    tensors.push_back({prefix + "/t" + std::to_string(t), offset, sizes[t]});
    offset += sizes[t];
  }
  return tensors;
}

// Counts the bytes of every phase.
class Tally : public te::CollectiveObserver {
 public:
  void record(const te::PhaseEvent& e) override {
    const auto p = static_cast<size_t>(e.phase);
    bytes[p] += e.bytes;
    ++events[p];
    if (e.end_ns < e.begin_ns) bad = true;
    max_tensor = std::max(max_tensor, e.tensor);
    if ((e.phase == te::Phase::kSend || e.phase == te::Phase::kReceive) && e.peer < 0) bad = true;
  }
  size_t bytes[6] = {};
  size_t events[6] = {};
  size_t max_tensor = 0;
  bool bad = false;
};

size_t phase_bytes(const Tally& t, te::Phase p) { return t.bytes[static_cast<size_t>(p)]; }

// --- allreduce_raw ------------------------------------------------------------------------------

void raw_case(tt::Context& ctx, te::ElementType type, te::ReduceOp op,
              const std::vector<size_t>& sizes, size_t chunk_bytes, bool pass_tensors,
              bool observe) {
  const int rank = ctx.rank();
  const int n = ctx.size();
  const std::string name = std::string("raw/") + te::element_type_name(type) + "/" +
                           te::reduce_op_name(op) + "/" + std::to_string(sizes.size()) + "x" +
                           std::to_string(sizes.empty() ? 0 : sizes.front()) + "/chunk" +
                           std::to_string(chunk_bytes) + (pass_tensors ? "" : "/untensored");
  const auto tensors = layout(name, sizes);
  size_t total = 0;
  for (const size_t s : sizes) total += s;
  const uint64_t salt = ts::fnv1a(std::as_bytes(std::span<const char>(name.data(), name.size())));
  Bytes fused = values(type, salt, rank, total);
  Bytes want = values(type, salt, 0, total);
  for (int r = 1; r < n; ++r) {
    const Bytes in = values(type, salt, r, total);
    te::reduce_into(type, op, want.data(), in.data(), total);
  }
  Tally tally;
  te::CollectiveOptions options;
  options.chunk_bytes = chunk_bytes;
  options.observer = observe ? &tally : nullptr;
  te::allreduce_raw(
      ctx, fused, type, op,
      pass_tensors ? std::span<const te::TensorSlice>(tensors) : std::span<const te::TensorSlice>(),
      options);
  print_hash(name, fused);
  expect_bytes(name + " rank " + std::to_string(rank), fused, want);
  if (!observe) return;
  // Push: everything but the own segment out, (N - 1) times the own segment in. Pull: the own
  // segment out plus every segment forwarded (all but the own and the next rank's), and every
  // other segment in.
  const size_t es = te::element_size(type);
  auto seg = [&](int j) {
    return (te::segment_start(total, n, j + 1) - te::segment_start(total, n, j)) * es;
  };
  const size_t all = total * es;
  const size_t own = seg(rank);
  const size_t next_seg = n > 1 ? seg((rank + 1) % n) : 0;
  const size_t sent = n == 1 ? 0 : (all - own) + own + (all - own - next_seg);
  const size_t received = n == 1 ? 0 : own * static_cast<size_t>(n - 1) + (all - own);
  if (phase_bytes(tally, te::Phase::kSend) != sent ||
      phase_bytes(tally, te::Phase::kReceive) != received || tally.bad ||
      (pass_tensors && !tensors.empty() && tally.max_tensor >= tensors.size())) {
    throw Mismatch{name + ": observer saw " + std::to_string(phase_bytes(tally, te::Phase::kSend)) +
                   " bytes sent and " + std::to_string(phase_bytes(tally, te::Phase::kReceive)) +
                   " received, expected " + std::to_string(sent) + " and " +
                   std::to_string(received)};
  }
  std::printf("EVENTS %s send %zu receive %zu reduce %zu\n", name.c_str(),
              tally.events[static_cast<size_t>(te::Phase::kSend)],
              tally.events[static_cast<size_t>(te::Phase::kReceive)],
              tally.events[static_cast<size_t>(te::Phase::kReduce)]);
}

void raw_cases(tt::Context& ctx) {
  const std::vector<std::vector<size_t>> small = {{0}, {1}, {5}, {3, 0, 8, 2}};
  for (const auto type : kTypes) {
    for (const auto op : kOps) {
      for (const auto& sizes : small) raw_case(ctx, type, op, sizes, 8, true, false);
      raw_case(ctx, type, op, {1001}, 64, false, false);
    }
  }
  raw_case(ctx, te::ElementType::kInt32, te::ReduceOp::kSum, {1000003}, size_t{1} << 18, true,
           true);
  raw_case(ctx, te::ElementType::kFloat16, te::ReduceOp::kMax, {700001, 0, 300001}, size_t{1} << 20,
           true, true);
  raw_case(ctx, te::ElementType::kFloat64, te::ReduceOp::kProduct, {4, 9, 1, 4001}, 256, true,
           true);
}

// --- ring_allreduce_sum
// ---------------------------------------------------------------------------

constexpr double kMaxValue = 8.0;  // ring inputs are integers in [-8, 8]

float ring_value(int rank, size_t tensor, size_t i, int iteration) {
  const size_t k = static_cast<size_t>(rank) * 7919 + tensor * 104729 + i * 31 + (i >> 7) +
                   static_cast<size_t>(iteration) * 17;
  return static_cast<float>(static_cast<int>(k % 17) - 8);
}

// First iteration (no prior error, s = 1): the h-th contributor quantizes a partial sum of
// magnitude <= h X (decoded values never exceed their block's max), losing at most half of
// it, so |out - exact| <= X/2 (1 + 2 + ... + N).
double first_bound(int n) { return kMaxValue / 2 * n * (n + 1) / 2; }

// Over iterations, d + e_new == a + e_old at every hop, so the accumulated output minus the
// accumulated exact sums is minus the sum of the N residuals at that element. A residual stays
// below its hop's partial-sum bound P_h (E <= (P + E) / 2), and P_h <= 2 P_(h-1) + X, P_1 = X:
// P_h = (2^h - 1) X, so the drift stays below (2^(N+1) - 2 - N) X whatever the iteration.
double drift_bound(int n) { return (std::ldexp(1.0, n + 1) - 2 - n) * kMaxValue; }

void ring_case(tt::Context& ctx, te::ErrorFeedbackStore& store, const std::string& base,
               const std::vector<size_t>& sizes, int iterations, size_t chunk_bytes,
               bool compress) {
  const int rank = ctx.rank();
  const int n = ctx.size();
  const std::string name = "ring/" + base + (compress ? "/3lc" : "/raw");
  const auto tensors = layout(name, sizes);
  size_t total = 0;
  for (const size_t s : sizes) total += s;
  std::vector<float> fused(total);
  std::vector<double> exact(total), cum_out(total, 0.0), cum_exact(total, 0.0);
  te::PushPullOptions options;
  options.compress = compress;
  options.chunk_bytes = chunk_bytes;
  options.tag_base = 0x2000;
  Tally tally;
  options.observer = &tally;
  double worst_first = 0.0, worst_drift = 0.0;
  for (int it = 0; it < iterations; ++it) {
    for (size_t t = 0; t < tensors.size(); ++t) {
      for (size_t i = 0; i < tensors[t].count; ++i) {
        fused[tensors[t].offset + i] = ring_value(rank, t, i, it);
        double sum = 0.0;
        for (int r = 0; r < n; ++r) sum += ring_value(r, t, i, it);
        exact[tensors[t].offset + i] = sum;
      }
    }
    te::ring_allreduce_sum(ctx, fused, tensors, store, options);
    print_hash(name + "/" + std::to_string(it), std::as_bytes(std::span<const float>(fused)));
    for (size_t i = 0; i < total; ++i) {
      const double out = fused[i];
      if (!compress || n == 1) {
        if (out != exact[i]) {
          throw Mismatch{name + " it " + std::to_string(it) + ": element " + std::to_string(i) +
                         " is " + std::to_string(out) + ", exact sum " + std::to_string(exact[i])};
        }
        continue;
      }
      cum_out[i] += out;
      cum_exact[i] += exact[i];
      const double drift = std::fabs(cum_out[i] - cum_exact[i]);
      worst_drift = std::max(worst_drift, drift);
      if (it == 0) worst_first = std::max(worst_first, std::fabs(out - exact[i]));
      if ((it == 0 && std::fabs(out - exact[i]) > first_bound(n) + 1e-3) ||
          drift > drift_bound(n) + 1e-2) {
        throw Mismatch{name + " it " + std::to_string(it) + ": element " + std::to_string(i) +
                       " is " + std::to_string(out) + ", exact sum " + std::to_string(exact[i]) +
                       ", drift " + std::to_string(drift)};
      }
    }
  }
  if (tally.bad ||
      (n > 1 && total > 0 &&
       (tally.events[static_cast<size_t>(te::Phase::kCompress)] == 0 ||
        tally.events[static_cast<size_t>(te::Phase::kSend)] == 0 ||
        tally.events[static_cast<size_t>(te::Phase::kReceive)] == 0)) ||
      (!tensors.empty() && tally.max_tensor >= tensors.size())) {
    throw Mismatch{name + ": implausible observer events"};
  }
  if (compress) {
    std::printf("STAT %s first_error %g (bound %g) max_drift %g (bound %g)\n", name.c_str(),
                worst_first, first_bound(n), worst_drift, drift_bound(n));
  }
}

void ring_cases(tt::Context& ctx) {
  te::ErrorFeedbackStore store;
  const std::vector<size_t> fused = {5, 0, 20481, 1, 7919, 4, 6, 30000};
  for (const bool compress : {false, true}) {
    ring_case(ctx, store, "small", {0, 1, 4, 5, 6}, 10, size_t{1} << 20, compress);
    ring_case(ctx, store, "odd", {20481}, 10, size_t{1} << 20, compress);
    ring_case(ctx, store, "fused_4k_chunks", fused, 10, 4096, compress);
    ring_case(ctx, store, "big", {1000001}, 2, size_t{1} << 20, compress);
  }
}

// --- push_pull events
// -----------------------------------------------------------------------------

void push_pull_events(tt::Context& ctx) {
  te::ErrorFeedbackStore store;
  const auto tensors = layout("pp", {100, 0, 5000});
  std::vector<float> fused(5100, 1.0f);
  Tally tally;
  te::PushPullOptions options;
  options.chunk_bytes = 4096;
  options.observer = &tally;
  te::push_pull_sum(ctx, fused, tensors, store, options);
  for (const float v : fused) {
    if (v != static_cast<float>(ctx.size())) throw Mismatch{"push_pull with observer: wrong sum"};
  }
  const bool none = ctx.size() == 1;
  for (const auto p :
       {te::Phase::kCompress, te::Phase::kDecompress, te::Phase::kSend, te::Phase::kReceive}) {
    if ((tally.events[static_cast<size_t>(p)] == 0) != none) {
      throw Mismatch{std::string("push_pull with observer: ") +
                     std::to_string(tally.events[static_cast<size_t>(p)]) + " " +
                     te::phase_name(p) + " events"};
    }
  }
  if (tally.bad || tally.max_tensor >= tensors.size()) {
    throw Mismatch{"push_pull with observer: implausible events"};
  }
}

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

// --- malformed messages ------------------------------------------------------------------------

int malformed(tt::Context& ctx, const std::string& mode) {
  const bool ring = mode == "garbage_ring";
  std::vector<float> fused(1000, 1.0f);
  const std::vector<te::TensorSlice> tensors = {{"w", 0, fused.size()}};
  const uint32_t tag = 0x1000;
  return ts::expect_error_from_rank1(ctx, tag, ring ? 64 : 10, "collectives_probe", [&] {
    if (ring) {
      te::ErrorFeedbackStore store;
      te::ring_allreduce_sum(ctx, fused, tensors, store, te::PushPullOptions{});
    } else {
      te::allreduce_raw(ctx, std::as_writable_bytes(std::span<float>(fused)),
                        te::ElementType::kFloat32, te::ReduceOp::kSum, tensors, {});
    }
  });
}

}  // namespace

int main() {
  return ts::probe_main("collectives_probe", [] {
    try {
      auto ctx = tt::connect(tt::options_from_environment());
      const char* mode = std::getenv("THREELC_PROBE_MODE");
      if (mode != nullptr && std::strcmp(mode, "check") != 0) return malformed(*ctx, mode);
      raw_cases(*ctx);
      ring_cases(*ctx);
      push_pull_events(*ctx);
      broadcast_cases(*ctx);
      allgather_cases(*ctx);
      for (const auto type : kTypes) {
        for (const auto op : kOps) reducescatter_case(*ctx, type, op, 64);
      }
      reducescatter_case(*ctx, te::ElementType::kFloat32, te::ReduceOp::kSum, size_t{1} << 20);
      alltoall_cases(*ctx);
      return 0;
    } catch (const Mismatch& m) {
      std::fprintf(stderr, "collectives_probe: mismatch: %s\n", m.what.c_str());
      return 2;
    }
  });
}
