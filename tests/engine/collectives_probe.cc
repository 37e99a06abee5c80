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
#include "collectives_probe.h"

namespace te = threelc::engine;
namespace tt = threelc::transport;
namespace ts = threelc::test_support;

namespace {

using namespace collectives_probe;  // NOLINT: the probe's own vocabulary

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
  // From a separate input into an output it does not read (the engine's direct path): the same
  // bytes, the input untouched.
  const Bytes input = values(type, salt, rank, total);
  Bytes output(input.size(), std::byte{0xAB});
  te::CollectiveOptions unobserved = options;
  unobserved.observer = nullptr;
  te::allreduce_raw(
      ctx, input, output, type, op,
      pass_tensors ? std::span<const te::TensorSlice>(tensors) : std::span<const te::TensorSlice>(),
      unobserved);
  expect_bytes(name + " direct, rank " + std::to_string(rank), output, want);
  expect_bytes(name + " direct, its input, rank " + std::to_string(rank), input,
               values(type, salt, rank, total));
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
  te::CompressedAllreduceOptions options;
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
  te::CompressedAllreduceOptions options;
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

// --- malformed messages ------------------------------------------------------------------------

int malformed(tt::Context& ctx, const std::string& mode) {
  const bool ring = mode == "garbage_ring";
  std::vector<float> fused(1000, 1.0f);
  const std::vector<te::TensorSlice> tensors = {{"w", 0, fused.size()}};
  const uint32_t tag = 0x1000;
  return ts::expect_error_from_rank1(ctx, tag, ring ? 64 : 10, "collectives_probe", [&] {
    if (ring) {
      te::ErrorFeedbackStore store;
      te::ring_allreduce_sum(ctx, fused, tensors, store, te::CompressedAllreduceOptions{});
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
