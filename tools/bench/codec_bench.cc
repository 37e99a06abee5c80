// threelc-bench codec: single-thread throughput of the 3LC codec against memcpy of the same
// buffer (measured in the same run), and the compression ratio on recorded gradients.
#include <x86intrin.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "codec_bench.h"
#include "settings.h"  // engine/src: the engine's settings table
#include "threelc/compression/codec.h"

namespace codec_bench {

bool parse_isa(std::string_view name, threelc::compression::Isa* isa) {
  namespace tc = threelc::compression;
  for (tc::Isa candidate : {tc::Isa::kAuto, tc::Isa::kScalar, tc::Isa::kAvx2, tc::Isa::kAvx512}) {
    if (tc::isa_name(candidate) == name) {
      *isa = candidate;
      return true;
    }
  }
  return false;
}

}  // namespace codec_bench

namespace {

using codec_bench::Options;
using codec_bench::parse_isa;
using codec_bench::run_ratio;
using threelc::compression::DType;
using threelc::compression::EncodedBlock;
using threelc::compression::EncodeOptions;
using threelc::compression::Isa;
using threelc::compression::Values;
namespace tc = threelc::compression;

constexpr const char* kHelp = R"(usage: threelc-bench codec [options]

Throughput mode (default): for each block size, single thread, fp32 input of Gaussian values
(sigma 1) with a residual buffer of Gaussian values (sigma 0.3, restored before every
repetition, outside the timing), it measures, interleaving the repetitions of the four ops
(blocks up to 64 MiB: each timed run right after an untimed warm-up run of the same op)
  memcpy      of the same number of bytes (the baseline),
  encode      threelc::compression::encode (abs-max pass + quantize/pack/zero-run pass),
  decode      decode into a separate buffer,
  decode_add  decode_add(alpha = 1) onto a buffer.
GB/s = fp32 input bytes / seconds (1 GB = 1e9 bytes), the median over the repetitions.
ratio = the op's GB/s / memcpy's GB/s. For blocks of at most 4 MiB it also prints cycles per
element, from the TSC (rdtsc; its rate is measured against the steady clock) and converted to
core cycles with a core clock estimated from a chain of dependent adds (1 per cycle).

Options:
  --sizes LIST      block sizes in MiB of fp32 input, comma-separated (default 1,16,256)
  --reps N          repetitions per measurement (default: 1 MiB 200, 16 MiB 21, larger 7)
  --isa NAME        auto | scalar | avx2 | avx512 | all (default auto; all = every ISA this
                    CPU supports). THREELC_CODEC_ISA also steers auto.
  --sparsity S      sparsity multiplier s in [1, 2) for encode (default: the engine's,
                    THREELC_SPARSITY, 1.0 unless set)
  --scale-tile T    values per 3LC scale: 0, one per block (format v1); a multiple of 5 up
                    to 20480, one per tile of T values (format v2). Default: the engine's,
                    THREELC_SCALE_TILE, 320 unless set
  --json            one JSON object per line instead of the table:
                    {"op","isa","bytes","mib","reps","seconds","gbps", "ratio_to_memcpy"
                     (encode, decode, decode_add), "cycles_per_element", ...}
  --gradients FILE  ratio mode: replay recorded gradients (format below) with error feedback
                    carried across steps per tensor, one block per tensor and step, and print
                    for each s in {1.0, 1.25, 1.5, 1.75, 1.9} (or --sparsities LIST) a line with
                    op "ratio", sparsity, bits_per_value (8 * encoded bytes / values) and
                    compression_ratio (32 / bits_per_value)
  --sparsities LIST the s values of ratio mode
  --help            this text

Gradient file (little-endian): 8-byte magic "TLCGRAD1"; u32 num_tensors; u32 num_steps;
num_tensors u64 element counts; then for each step, for each tensor, that many fp32 values.
)";

template <typename T>
bool parse_list(const char* text, std::vector<T>* out) {
  out->clear();
  std::string s(text);
  size_t pos = 0;
  while (pos <= s.size()) {
    const size_t comma = std::min(s.find(',', pos), s.size());
    const std::string item = s.substr(pos, comma - pos);
    char* end = nullptr;
    const double v = std::strtod(item.c_str(), &end);
    if (item.empty() || end == nullptr || *end != '\0' || !(v > 0)) return false;
    out->push_back(static_cast<T>(v));
    pos = comma + 1;
  }
  return !out->empty();
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 == 1 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

// TSC ticks per second, measured against the steady clock.
double tsc_hz() {
  const double t0 = now_seconds();
  const uint64_t c0 = __rdtsc();
  while (now_seconds() - t0 < 0.05) {
  }
  const double t1 = now_seconds();
  const uint64_t c1 = __rdtsc();
  return static_cast<double>(c1 - c0) / (t1 - t0);
}

// Core clock estimate: a loop whose iterations form a chain of dependent single-cycle adds.
double core_hz() {
  constexpr uint64_t kIters = 200'000'000;
  std::vector<double> rates;
  for (int r = 0; r < 3; ++r) {
    uint64_t counter = kIters;
    uint64_t acc = 0;
    const double t0 = now_seconds();
    asm volatile(
        "1:\n\t"
        "add $1, %0\n\t"
        "add $1, %0\n\t"
        "add $1, %0\n\t"
        "add $1, %0\n\t"
        "sub $1, %1\n\t"
        "jnz 1b\n\t"
        : "+r"(acc), "+r"(counter)
        :
        : "cc");
    const double t1 = now_seconds();
    rates.push_back(4.0 * static_cast<double>(kIters) / (t1 - t0));
  }
  return *std::max_element(rates.begin(), rates.end());
}

struct Timing {
  double seconds = 0;  // median
  double ticks = 0;    // median TSC ticks
};

// Times a set of operations with their repetitions interleaved (op 0, op 1, ..., op 0, ...),
// so that a slow phase of a shared machine hits every op alike and the ratios stay fair.
// prepare[i] runs before each timed body[i], outside the timing. With warm_each, every timed
// run is preceded by an untimed one (prepare, body), so that blocks that fit in the caches
// are measured warm rather than after the other ops evicted them.
struct Op {
  std::function<void()> prepare;
  std::function<void()> body;
};

std::vector<Timing> measure_interleaved(int reps, bool warm_each, const std::vector<Op>& ops) {
  std::vector<std::vector<double>> secs(ops.size()), ticks(ops.size());
  for (const Op& op : ops) {  // warm-up
    op.prepare();
    op.body();
  }
  for (int r = 0; r < reps; ++r) {
    for (size_t i = 0; i < ops.size(); ++i) {
      if (warm_each) {
        ops[i].prepare();
        ops[i].body();
      }
      ops[i].prepare();
      const double t0 = now_seconds();
      const uint64_t c0 = __rdtsc();
      ops[i].body();
      const uint64_t c1 = __rdtsc();
      const double t1 = now_seconds();
      secs[i].push_back(t1 - t0);
      ticks[i].push_back(static_cast<double>(c1 - c0));
    }
  }
  std::vector<Timing> out;
  for (size_t i = 0; i < ops.size(); ++i) out.push_back(Timing{median(secs[i]), median(ticks[i])});
  return out;
}

struct Clock {
  double tsc = 0;
  double core = 0;
};

void report(const Options& opt, const Clock& clock, const char* op, Isa isa, size_t n, int reps,
            const Timing& t, double memcpy_gbps, size_t encoded_bytes) {
  const double bytes = 4.0 * static_cast<double>(n);
  const double gbps = bytes / t.seconds / 1e9;
  const bool with_cycles = bytes <= 4.0 * (1 << 20);
  const double tsc_per_elem = t.ticks / static_cast<double>(n);
  const double core_per_elem = t.seconds * clock.core / static_cast<double>(n);
  const bool with_ratio = std::strcmp(op, "memcpy") != 0;
  const std::string isa_str(tc::isa_name(isa));
  if (opt.json) {
    std::printf(
        "{\"op\":\"%s\",\"isa\":\"%s\",\"scale_tile\":%zu,\"bytes\":%.0f,\"mib\":%.6g,"
        "\"reps\":%d,\"seconds\":%.9f,\"gbps\":%.4f",
        op, isa_str.c_str(), opt.scale_tile, bytes, bytes / (1 << 20), reps, t.seconds, gbps);
    if (with_ratio) std::printf(",\"ratio_to_memcpy\":%.4f", gbps / memcpy_gbps);
    if (encoded_bytes != 0) {
      std::printf(",\"encoded_bytes\":%zu,\"bits_per_value\":%.5f", encoded_bytes,
                  8.0 * static_cast<double>(encoded_bytes) / static_cast<double>(n));
    }
    if (with_cycles) {
      std::printf(
          ",\"cycles_per_element\":%.4f,\"cycles_source\":\"rdtsc\",\"tsc_ghz\":%.4f,"
          "\"core_cycles_per_element_est\":%.4f,\"core_ghz_est\":%.4f",
          tsc_per_elem, clock.tsc / 1e9, core_per_elem, clock.core / 1e9);
    }
    std::printf("}\n");
  } else {
    std::printf("%9.6g %-7s %-10s %9.3f", bytes / (1 << 20), isa_str.c_str(), op, gbps);
    if (with_ratio) {
      std::printf(" %8.3fx", gbps / memcpy_gbps);
    } else {
      std::printf(" %9s", "1x");
    }
    std::printf(" %10.3f", t.seconds * 1e3);
    if (with_cycles) {
      std::printf(" %10.3f %10.3f", tsc_per_elem, core_per_elem);
    } else {
      std::printf(" %10s %10s", "-", "-");
    }
    if (encoded_bytes != 0) {
      std::printf("  %.3f bits/value",
                  8.0 * static_cast<double>(encoded_bytes) / static_cast<double>(n));
    }
    std::printf("\n");
  }
  std::fflush(stdout);
}

// Blocks up to this size (fp32 input bytes) are timed warm (see measure_interleaved).
constexpr double kWarmBytes = 64.0 * (1 << 20);

int run_throughput(const Options& opt) {
  std::vector<Isa> isas;
  if (opt.isa == "all") {
    isas = tc::supported_isas();
  } else {
    Isa isa;
    if (!parse_isa(opt.isa, &isa)) {
      std::fprintf(stderr, "unknown --isa %s\n", opt.isa.c_str());
      return 2;
    }
    if (!tc::isa_supported(isa)) {
      std::fprintf(stderr, "--isa %s is not supported on this CPU\n", opt.isa.c_str());
      return 2;
    }
    isas.push_back(isa == Isa::kAuto ? tc::detected_isa() : isa);
  }
  Clock clock{tsc_hz(), core_hz()};
  if (!opt.json) {
    std::printf(
        "single thread; GB/s = fp32 input bytes / median seconds; s = %.3g, scale tile "
        "%zu\n",
        static_cast<double>(opt.sparsity), opt.scale_tile);
    std::printf(
        "cycles: TSC ticks per element (TSC %.3f GHz) and core cycles per element "
        "estimated with a %.3f GHz core clock (dependent-add chain)\n",
        clock.tsc / 1e9, clock.core / 1e9);
    std::printf("%9s %-7s %-10s %9s %9s %10s %10s %10s\n", "MiB", "isa", "op", "GB/s", "ratio",
                "ms", "tsc/elem", "cyc/elem");
  }
  for (double mib : opt.sizes_mib) {
    const size_t n = static_cast<size_t>(mib * (1 << 20) / 4);
    if (n == 0 || n > UINT32_MAX) {
      std::fprintf(stderr, "size %g MiB is out of range\n", mib);
      return 2;
    }
    const int reps = opt.reps > 0 ? opt.reps : (mib <= 1 ? 200 : (mib <= 16 ? 21 : 7));
    std::vector<float> x(n), e0(n), e(n), dst(n), acc(n);
    std::mt19937 rng(1234);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (size_t i = 0; i < n; ++i) {
      x[i] = normal(rng);
      e0[i] = 0.3f * normal(rng);
    }
    std::vector<uint8_t> block(tc::max_block_bytes(n), 0);
    std::fill(acc.begin(), acc.end(), 0.0f);
    std::fill(dst.begin(), dst.end(), 0.0f);
    e = e0;
    for (Isa isa : isas) {
      EncodedBlock result;
      EncodeOptions eopt;
      eopt.sparsity = opt.sparsity;
      eopt.scale_tile = opt.scale_tile;
      eopt.isa = isa;
      const Values values{x.data(), DType::kFloat32, n};
      std::memcpy(e.data(), e0.data(), 4 * n);
      if (!tc::encode(values, e.data(), eopt, block, &result).ok()) {
        std::fprintf(stderr, "encode failed\n");
        return 1;
      }
      const size_t encoded_bytes = result.bytes;
      const std::span<const uint8_t> encoded(block.data(), encoded_bytes);
      bool ok = true;
      const auto nothing = [] {};
      const std::vector<Op> ops = {
          {nothing, [&] { std::memcpy(dst.data(), x.data(), 4 * n); }},
          // The residual buffer is restored before every encode, so each one sees the same input.
          {[&] { std::memcpy(e.data(), e0.data(), 4 * n); },
           [&] { ok = ok && tc::encode(values, e.data(), eopt, block, &result).ok(); }},
          {nothing, [&] { ok = ok && tc::decode(encoded, n, dst.data(), {isa}).ok(); }},
          {nothing, [&] { ok = ok && tc::decode_add(encoded, n, 1.0f, acc.data(), {isa}).ok(); }},
      };
      const std::vector<Timing> t =
          measure_interleaved(reps, 4.0 * static_cast<double>(n) <= kWarmBytes, ops);
      if (!ok || result.bytes != encoded_bytes) {
        std::fprintf(stderr, "codec call failed\n");
        return 1;
      }
      const double memcpy_gbps = 4.0 * static_cast<double>(n) / t[0].seconds / 1e9;
      report(opt, clock, "memcpy", isa, n, reps, t[0], memcpy_gbps, 0);
      report(opt, clock, "encode", isa, n, reps, t[1], memcpy_gbps, encoded_bytes);
      report(opt, clock, "decode", isa, n, reps, t[2], memcpy_gbps, 0);
      report(opt, clock, "decode_add", isa, n, reps, t[3], memcpy_gbps, 0);
    }
  }
  return 0;
}

}  // namespace

int run_codec_bench(int argc, char** argv) {
  Options opt;
  // The format and sparsity the engine runs (its defaults, or THREELC_SCALE_TILE and
  // THREELC_SPARSITY), unless the options say otherwise.
  try {
    const auto engine = threelc::engine::engine_settings_from_environment();
    opt.scale_tile = engine.scale_tile;
    opt.sparsity = engine.sparsity;
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
  for (int i = 0; i < argc; ++i) {
    const std::string_view arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--help" || arg == "-h") {
      std::fputs(kHelp, stdout);
      return 0;
    } else if (arg == "--json") {
      opt.json = true;
    } else if (arg == "--sizes" && has_value) {
      if (!parse_list(argv[++i], &opt.sizes_mib)) {
        std::fprintf(stderr, "bad --sizes %s\n", argv[i]);
        return 2;
      }
    } else if (arg == "--reps" && has_value) {
      opt.reps = std::atoi(argv[++i]);
      if (opt.reps <= 0) {
        std::fprintf(stderr, "bad --reps %s\n", argv[i]);
        return 2;
      }
    } else if (arg == "--isa" && has_value) {
      opt.isa = argv[++i];
    } else if (arg == "--sparsity" && has_value) {
      opt.sparsity = std::strtof(argv[++i], nullptr);
      if (!(opt.sparsity >= 1.0f && opt.sparsity < 2.0f)) {
        std::fprintf(stderr, "--sparsity must be in [1, 2)\n");
        return 2;
      }
    } else if (arg == "--scale-tile" && has_value) {
      opt.scale_tile = std::strtoul(argv[++i], nullptr, 10);
      if (!tc::scale_tile_valid(opt.scale_tile)) {
        std::fprintf(stderr, "--scale-tile must be 0 or a multiple of 5 up to 20480\n");
        return 2;
      }
    } else if (arg == "--sparsities" && has_value) {
      if (!parse_list(argv[++i], &opt.sparsities)) {
        std::fprintf(stderr, "bad --sparsities %s\n", argv[i]);
        return 2;
      }
    } else if (arg == "--gradients" && has_value) {
      opt.gradients = argv[++i];
    } else {
      std::fprintf(stderr, "unknown option %s (see threelc-bench codec --help)\n", argv[i]);
      return 2;
    }
  }
  return opt.gradients.empty() ? run_throughput(opt) : run_ratio(opt);
}
