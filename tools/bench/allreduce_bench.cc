// threelc-bench allreduce: time of the engine's allreduce (push_pull) through the public C ABI,
// one process per rank (threelcrun). Compare with tools/bench/gloo_bench.py, which prints the same
// fields for torch.distributed's gloo (tools/bench/allreduce_vs_gloo.sh runs both).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "settings.h"  // engine/src: the engine's settings table
#include "threelc/codec.h"
#include "threelc/threelc.h"

namespace {

constexpr const char* kHelp =
    R"(usage: threelc-bench allreduce [options]   (one process per rank: threelcrun -np N ...)

For each size, every rank allreduces (sum) one float32 tensor of S MiB (S * 2^20 bytes) named
"allreduce_bench/<index>/<bytes>": Gaussian values (sigma 0.01, a fixed seed per rank), the same input
every iteration, so the engine's error feedback carries over from call to call as it does
between training steps. --warmup untimed calls, a threelc_barrier, then --iters timed calls
back to back (no barrier between them). A call's time is rank 0's wall time from
threelc_allreduce to the return of threelc_wait; the median over the calls is reported.

wire_bytes_per_rank: bytes rank 0 sent to other ranks per timed call (mean), the engine's own
count: wire_bytes_sent of threelc_get_statistics read between the calls (the messages'
payload; the transport's frame headers are not counted). wire_bytes_last_call: the last call's.
wire_bytes_estimate: an independent recomputation of the last call with the codec C ABI on the
engine's push_pull block plan (segments, chunks of THREELC_CHUNK_BYTES, a 3LC scale per
THREELC_SCALE_TILE values), which must equal
wire_bytes_last_call: the push blocks (to every segment's owner) by replaying rank 0's error
feedback over every call made so far on the same input, the pull blocks (its own segment and
those it forwards around the ring) by re-encoding the result (s = 1 reproduces the trits of a
decoded block exactly). With --compression none the engine's raw scatter/reduce/gather sends
the bare values (4 bytes each) in the same segments. The estimate assumes
THREELC_ALLREDUCE=push_pull (the default).

The table (without --json) also shows "vs ring": how many times fewer bytes than the
2 (N-1)/N * bytes an uncompressed ring allreduce (gloo's) sends per rank.

After the timed calls the ranks allgather a hash of their results, which must agree bit for bit
("consistent" in the JSON).

Options:
  --size-mb LIST       tensor sizes in MiB, comma-separated (default 1,16,100)
  --compression MODE   threelc | none (default threelc); passed per call, so it overrides
                       THREELC_COMPRESSION
  --sparsity S         3LC sparsity multiplier in [1, 2) (default THREELC_SPARSITY, else 1.0)
  --iters N            timed calls per size (default 10)
  --warmup W           untimed calls before them (default 1)
  --check              rank 0 also regenerates every rank's input and compares the result with
                       the exact sum (--compression none: within fp32 rounding; threelc: the
                       relative L2 error is reported as "rel_error")
  --json               rank 0 prints one JSON object per size:
                       {"op":"allreduce","compression","ranks","bytes","time_s_median",
                        "wire_bytes_per_rank","wire_bytes_estimate",...}
  --help               this text
)";

struct Options {
  std::vector<double> sizes_mib{1, 16, 100};
  bool compress = true;
  float sparsity = 1.0f;
  int iters = 10;
  int warmup = 1;
  bool check = false;
  bool json = false;
};

// The engine's settings as the engine reads them (THREELC_CHUNK_BYTES, THREELC_SCALE_TILE,
// THREELC_SPARSITY, ...): the wire estimate mirrors them. A malformed value throws, naming it.
const threelc::engine::EngineSettings& engine_settings() {
  static const auto settings = threelc::engine::engine_settings_from_environment();
  return settings;
}

bool parse_sizes(const char* text, std::vector<double>* out) {
  out->clear();
  const std::string list = text;
  for (size_t at = 0; at <= list.size();) {
    const size_t comma = std::min(list.find(',', at), list.size());
    const std::string item = list.substr(at, comma - at);
    char* end = nullptr;
    const double value = std::strtod(item.c_str(), &end);
    if (item.empty() || *end != '\0' || !(value > 0)) return false;
    out->push_back(value);
    at = comma + 1;
  }
  return !out->empty();
}

bool parse_int(const char* text, int min, int* out) {
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  if (*text == '\0' || *end != '\0' || value < min || value > 1000000) return false;
  *out = static_cast<int>(value);
  return true;
}

// Gaussian values from splitmix64 and Box-Muller: deterministic per seed, fast enough to fill
// 100 MiB in a fraction of a second.
uint64_t splitmix64(uint64_t* state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

void fill_gaussian(std::vector<float>* values, uint64_t seed, double sigma) {
  uint64_t state = seed;
  constexpr double kTwoPi = 6.283185307179586;
  const size_t n = values->size();
  for (size_t i = 0; i < n; i += 2) {
    // u1 in (0, 1], u2 in [0, 1): 53 random bits each.
    const double u1 = static_cast<double>((splitmix64(&state) >> 11) + 1) * 0x1.0p-53;
    const double u2 = static_cast<double>(splitmix64(&state) >> 11) * 0x1.0p-53;
    const double r = sigma * std::sqrt(-2.0 * std::log(u1));
    (*values)[i] = static_cast<float>(r * std::cos(kTwoPi * u2));
    if (i + 1 < n) (*values)[i + 1] = static_cast<float>(r * std::sin(kTwoPi * u2));
  }
}

uint64_t rank_seed(int rank) { return 0x3C3C0000ull + static_cast<uint64_t>(rank) * 7919u; }

uint64_t fnv1a(const void* data, size_t bytes) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t h = 0xCBF29CE484222325ull;
  for (size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 0x100000001B3ull;
  return h;
}

// The engine's block plan for one tensor alone in the fused buffer (engine/src/collectives/
// block_plan.cc): N segments, the first total % N one value longer; each cut into chunks of
// chunk_bytes / 4 values from the segment's start.
struct Span {
  size_t offset;
  size_t count;
};

size_t segment_start(size_t total, int ranks, int j) {
  const auto n = static_cast<size_t>(ranks);
  const auto k = static_cast<size_t>(j);
  return k * (total / n) + std::min(k, total % n);
}

std::vector<Span> segment_blocks(size_t total, int ranks, int j, size_t chunk) {
  std::vector<Span> blocks;
  const size_t end = segment_start(total, ranks, j + 1);
  for (size_t at = segment_start(total, ranks, j); at < end; at += chunk) {
    blocks.push_back(Span{at, std::min(chunk, end - at)});
  }
  return blocks;
}

class Failure {
 public:
  explicit Failure(std::string message) : message_(std::move(message)) {}
  const std::string& message() const { return message_; }

 private:
  std::string message_;
};

void check(int rc, const char* what) {
  if (rc < 0) {
    throw Failure(std::string(what) + " failed (" + std::to_string(rc) +
                  "): " + threelc_last_error());
  }
}

// Submits an operation. Works around a race in the engine (reported to the lead): the handle
// completes before the tensor's name leaves the in-flight table, so submitting the same name
// right after threelc_wait returned may fail with THREELC_EDUPLICATE for a few microseconds.
template <typename Submit>
threelc_handle submit(Submit&& call) {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  for (;;) {
    const threelc_handle handle = call();
    if (handle != THREELC_EDUPLICATE || std::chrono::steady_clock::now() > give_up) return handle;
    std::this_thread::yield();
  }
}

// Waits for and releases a handle; throws with the operation's message on failure.
void finish(threelc_handle handle, const char* what) {
  check(static_cast<int>(handle < 0 ? handle : 0), what);
  const int rc = threelc_wait(handle, -1);
  if (rc != THREELC_OK) {
    const std::string message = threelc_handle_error(handle);
    threelc_release(handle);
    throw Failure(std::string(what) + " failed (" + std::to_string(rc) + "): " + message);
  }
  threelc_release(handle);
}

// Bytes of `count` values at `values` on the wire: a 3LC block, or (!compress) the bare fp32
// values the engine's raw scatter/reduce/gather sends (no block header).
size_t block_bytes(const float* values, size_t count, float* error, float sparsity, bool compress,
                   std::vector<uint8_t>* scratch) {
  if (!compress) return count * sizeof(float);
  const size_t scale_tile = engine_settings().scale_tile;
  scratch->resize(threelc_codec_max_block_bytes(count));
  size_t bytes = 0;
  if (threelc_codec_encode_tiled(values, THREELC_FLOAT32, count, error, sparsity, scale_tile,
                                 scratch->data(), scratch->size(), &bytes) != THREELC_OK) {
    throw Failure(std::string("codec estimate failed: ") + threelc_codec_last_error());
  }
  return bytes;
}

struct Wire {
  size_t push = 0;
  size_t pull = 0;
};

// What `rank` sent in call number `calls` (1-based) of push_pull on `input` (the same input
// every call), given `result`, the output of that call.
Wire estimate_wire(const std::vector<float>& input, const std::vector<float>& result, int rank,
                   int size, int calls, const Options& opt) {
  Wire wire;
  if (size == 1) return wire;
  const size_t total = input.size();
  const size_t chunk = std::max<size_t>(1, engine_settings().chunk_bytes / sizeof(float));
  std::vector<uint8_t> scratch;
  // Push: every segment but its own, with the rank's error feedback replayed call by call.
  std::vector<float> error(opt.compress ? total : 0, 0.0f);
  for (int call = 1; call <= (opt.compress ? calls : 1); ++call) {
    wire.push = 0;
    for (int d = 1; d < size; ++d) {
      for (const Span& b : segment_blocks(total, size, (rank + d) % size, chunk)) {
        wire.push += block_bytes(input.data() + b.offset, b.count,
                                 opt.compress ? error.data() + b.offset : nullptr, opt.sparsity,
                                 opt.compress, &scratch);
      }
    }
  }
  // Pull: the own segment's blocks and those forwarded around the ring (all but the segment of
  // the next rank, which that rank owns). A decoded 3LC block re-encoded with s = 1, no error
  // and the same scale tiles gives the same trits (each tile's values are its scale or 0),
  // hence the same bytes.
  for (int j = 0; j < size; ++j) {
    if (j == (rank + 1) % size) continue;
    for (const Span& b : segment_blocks(total, size, j, chunk)) {
      wire.pull +=
          block_bytes(result.data() + b.offset, b.count, nullptr, 1.0f, opt.compress, &scratch);
    }
  }
  return wire;
}

// Relative L2 error of `result` against the exact sum of every rank's input (regenerated).
double relative_error(const std::vector<float>& result, int size) {
  std::vector<double> exact(result.size(), 0.0);
  std::vector<float> input(result.size());
  for (int r = 0; r < size; ++r) {
    fill_gaussian(&input, rank_seed(r), 0.01);
    for (size_t i = 0; i < input.size(); ++i) exact[i] += static_cast<double>(input[i]);
  }
  double diff = 0, norm = 0;
  for (size_t i = 0; i < result.size(); ++i) {
    const double e = static_cast<double>(result[i]) - exact[i];
    diff += e * e;
    norm += exact[i] * exact[i];
  }
  return norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
}

bool parse(int argc, char** argv, Options* opt, int* exit_code) {
  opt->sparsity = engine_settings().sparsity;
  for (int i = 0; i < argc; ++i) {
    const std::string_view arg = argv[i];
    const bool has_value = i + 1 < argc;
    bool ok = true;
    if (arg == "--help" || arg == "-h") {
      std::fputs(kHelp, stdout);
      *exit_code = 0;
      return false;
    } else if (arg == "--json") {
      opt->json = true;
    } else if (arg == "--check") {
      opt->check = true;
    } else if (arg == "--size-mb" && has_value) {
      ok = parse_sizes(argv[++i], &opt->sizes_mib);
    } else if (arg == "--compression" && has_value) {
      const std::string_view mode = argv[++i];
      ok = mode == "threelc" || mode == "none";
      opt->compress = mode == "threelc";
    } else if (arg == "--sparsity" && has_value) {
      char* end = nullptr;
      opt->sparsity = std::strtof(argv[++i], &end);
      ok = *end == '\0';
    } else if (arg == "--iters" && has_value) {
      ok = parse_int(argv[++i], 1, &opt->iters);
    } else if (arg == "--warmup" && has_value) {
      ok = parse_int(argv[++i], 0, &opt->warmup);
    } else {
      std::fprintf(stderr, "threelc-bench allreduce: unknown option '%s'\n%s", argv[i], kHelp);
      *exit_code = 2;
      return false;
    }
    if (!ok) {
      std::fprintf(stderr, "threelc-bench allreduce: bad value '%s' for %s\n", argv[i],
                   argv[i - 1]);
      *exit_code = 2;
      return false;
    }
  }
  if (!(opt->sparsity >= 1.0f && opt->sparsity < 2.0f)) {
    std::fprintf(stderr, "threelc-bench allreduce: sparsity %g is outside [1, 2)\n",
                 static_cast<double>(opt->sparsity));
    *exit_code = 2;
    return false;
  }
  return true;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

void run_size(double mib, int index, const Options& opt) {
  const int rank = threelc_rank(), size = threelc_size();
  const size_t count = static_cast<size_t>(mib * 1024 * 1024) / sizeof(float);
  const size_t bytes = count * sizeof(float);
  std::vector<float> input(count), output(count);
  fill_gaussian(&input, rank_seed(rank), 0.01);

  // One name per entry of --size-mb (a size may be listed twice).
  std::string name = "allreduce_bench/";
  name += std::to_string(index);
  name += '/';
  name += std::to_string(bytes);
  const int64_t shape[1] = {static_cast<int64_t>(count)};
  threelc_tensor tensor;
  threelc_tensor_init(&tensor);
  tensor.name = name.c_str();
  tensor.dtype = THREELC_FLOAT32;
  tensor.ndim = 1;
  tensor.shape = shape;
  tensor.data = input.data();
  tensor.output = output.data();
  tensor.device = THREELC_DEVICE_CPU;
  threelc_options options;
  threelc_options_init(&options);
  options.op = THREELC_OP_SUM;
  options.compression = opt.compress ? THREELC_COMPRESSION_3LC : THREELC_COMPRESSION_NONE;
  options.sparsity = opt.sparsity;

  for (int i = 0; i < opt.warmup; ++i)
    finish(submit([&] { return threelc_allreduce(&tensor, &options); }), "allreduce");
  finish(threelc_barrier(), "barrier");
  // Bytes sent per call, read between the calls (outside the timed region).
  threelc_statistics stats{};
  check(threelc_get_statistics(&stats), "threelc_get_statistics");
  uint64_t sent = stats.wire_bytes_sent, sent_total = 0, sent_last = 0;
  std::vector<double> times;
  times.reserve(static_cast<size_t>(opt.iters));
  for (int i = 0; i < opt.iters; ++i) {
    const auto start = std::chrono::steady_clock::now();
    const threelc_handle handle = submit([&] { return threelc_allreduce(&tensor, &options); });
    finish(handle, "allreduce");
    times.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    check(threelc_get_statistics(&stats), "threelc_get_statistics");
    sent_last = stats.wire_bytes_sent - sent;
    sent_total += sent_last;
    sent = stats.wire_bytes_sent;
  }
  const uint64_t wire_measured = sent_total / static_cast<uint64_t>(opt.iters);

  // Every rank must hold the same bits.
  int64_t hash = static_cast<int64_t>(fnv1a(output.data(), bytes));
  const int64_t one[1] = {1};
  threelc_tensor h;
  threelc_tensor_init(&h);
  h.name = "allreduce_bench/hash";
  h.dtype = THREELC_INT64;
  h.ndim = 1;
  h.shape = one;
  h.data = &hash;
  h.device = THREELC_DEVICE_CPU;
  const threelc_handle gathered = submit([&] { return threelc_allgather(&h, nullptr); });
  check(static_cast<int>(gathered < 0 ? gathered : 0), "allgather");
  const int rc = threelc_wait(gathered, -1);
  if (rc != THREELC_OK) {
    throw Failure(std::string("allgather of the result hash failed: ") +
                  threelc_handle_error(gathered));
  }
  threelc_result result;
  check(threelc_handle_result(gathered, &result), "threelc_handle_result");
  bool consistent = result.bytes == sizeof(int64_t) * static_cast<size_t>(size);
  for (int r = 0; consistent && r < size; ++r) {
    consistent = static_cast<const int64_t*>(result.data)[r] == hash;
  }
  threelc_release(gathered);
  if (!consistent) {
    std::fprintf(stderr, "threelc-bench allreduce: rank %d: results differ between ranks\n", rank);
  }
  if (rank != 0) {
    if (!consistent) throw Failure("ranks ended with different results");
    return;
  }

  const Wire wire = estimate_wire(input, output, rank, size, opt.warmup + opt.iters, opt);
  const double rel_error = opt.check ? relative_error(output, size) : -1.0;
  const double med = median(times);
  const double lo = *std::min_element(times.begin(), times.end());
  const double hi = *std::max_element(times.begin(), times.end());
  const size_t wire_total = wire.push + wire.pull;
  const auto wire_bytes = static_cast<unsigned long long>(wire_measured);
  const auto wire_last = static_cast<unsigned long long>(sent_last);
  const char* mode = opt.compress ? "threelc" : "none";
  if (opt.json) {
    std::printf(
        "{\"op\":\"allreduce\",\"compression\":\"%s\",\"ranks\":%d,\"bytes\":%zu,\"iters\":%d,"
        "\"warmup\":%d,\"sparsity\":%g,\"time_s_median\":%.6f,\"time_s_min\":%.6f,"
        "\"time_s_max\":%.6f,\"algbw_gbps\":%.4f,\"wire_bytes_per_rank\":%llu,"
        "\"wire_bytes_source\":\"threelc_get_statistics\",\"wire_bytes_last_call\":%llu,"
        "\"wire_bytes_estimate\":%zu,"
        "\"wire_bytes_estimate_push\":%zu,\"wire_bytes_estimate_pull\":%zu,\"consistent\":%s",
        mode, size, bytes, opt.iters, opt.warmup, static_cast<double>(opt.sparsity), med, lo, hi,
        static_cast<double>(bytes) / med / 1e9, wire_bytes, wire_last, wire_total, wire.push,
        wire.pull, consistent ? "true" : "false");
    if (opt.check) std::printf(",\"rel_error\":%.6g", rel_error);
    std::printf("}\n");
  } else {
    // "vs ring": how many times fewer bytes than an uncompressed ring's 2 (N-1)/N * bytes.
    const double ring = 2.0 * static_cast<double>(size - 1) / size * static_cast<double>(bytes);
    std::printf("%-8s %12zu %6d %6d %10.5f %10.5f %10.5f %11.3f %13llu %13zu %7.1fx%s", mode, bytes,
                size, opt.iters, med, lo, hi, static_cast<double>(bytes) / med / 1e9, wire_bytes,
                wire_total, wire_bytes > 0 ? ring / static_cast<double>(wire_bytes) : 0.0,
                consistent ? "" : "  INCONSISTENT");
    if (opt.check) std::printf("  rel_error %.3g", rel_error);
    std::printf("\n");
  }
  std::fflush(stdout);
  if (!consistent) throw Failure("ranks ended with different results");
  if (opt.check && !opt.compress && !(rel_error < 1e-5)) {
    throw Failure("the uncompressed result is not the sum of the inputs (relative error " +
                  std::to_string(rel_error) + ")");
  }
}

}  // namespace

int run_allreduce_bench(int argc, char** argv) {
  Options opt;
  int exit_code = 0;
  if (!parse(argc, argv, &opt, &exit_code)) return exit_code;
  if (threelc_init() != THREELC_OK) {
    std::fprintf(stderr, "threelc-bench allreduce: threelc_init failed: %s\n",
                 threelc_last_error());
    return 1;
  }
  int status = 0;
  try {
    if (threelc_rank() == 0 && !opt.json) {
      std::printf("%-8s %12s %6s %6s %10s %10s %10s %11s %13s %13s %8s\n", "mode", "bytes", "ranks",
                  "iters", "median s", "min s", "max s", "algbw GB/s", "wire B/rank", "estimate",
                  "vs ring");
      std::fflush(stdout);
    }
    for (size_t i = 0; i < opt.sizes_mib.size(); ++i) {
      run_size(opt.sizes_mib[i], static_cast<int>(i), opt);
    }
  } catch (const Failure& f) {
    std::fprintf(stderr, "threelc-bench allreduce: rank %d: %s\n", threelc_rank(),
                 f.message().c_str());
    status = 1;
  }
  threelc_shutdown();
  return status;
}
