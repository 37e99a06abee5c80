// The single table of environment variables the engine reads, and engine_settings_from() over
// it. Nothing else in engine/ calls getenv() for a THREELC_* variable.
#include "settings.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <stdexcept>
#include <system_error>

#include "threelc/compression/codec.h"

namespace threelc::engine {
namespace {

// --- value parsers: nullopt / false for anything malformed ------------------------------------

bool equals_ignoring_case(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

// A finite decimal number ("0.5", "2", "1e-3"); no sign, no spaces, no hex.
std::optional<double> parse_number(std::string_view text) {
  if (text.empty() || text.front() == '-' || text.front() == '+') return std::nullopt;
  double value = 0;
  const auto [end, error] =
      std::from_chars(text.data(), text.data() + text.size(), value, std::chars_format::general);
  if (error != std::errc() || end != text.data() + text.size() || !std::isfinite(value)) {
    return std::nullopt;
  }
  return value;
}

// Decimal digits only (no sign, suffix or spaces), at most `max`.
std::optional<uint64_t> parse_integer(std::string_view text, uint64_t max) {
  if (text.empty() || !std::isdigit(static_cast<unsigned char>(text.front()))) return std::nullopt;
  uint64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value, 10);
  if (error != std::errc() || end != text.data() + text.size() || value > max) return std::nullopt;
  return value;
}

// Bytes: decimal digits, optionally followed by one suffix K, M or G (any case) for KiB, MiB,
// GiB. At most `max`.
std::optional<uint64_t> parse_bytes(std::string_view text, uint64_t max) {
  uint64_t unit = 1;
  if (!text.empty()) {
    switch (std::toupper(static_cast<unsigned char>(text.back()))) {
      case 'K':
        unit = uint64_t{1} << 10;
        break;
      case 'M':
        unit = uint64_t{1} << 20;
        break;
      case 'G':
        unit = uint64_t{1} << 30;
        break;
      default:
        break;
    }
    if (unit != 1) text.remove_suffix(1);
  }
  if (text.empty() || !std::isdigit(static_cast<unsigned char>(text.front()))) return std::nullopt;
  uint64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value, 10);
  if (error != std::errc() || end != text.data() + text.size() || value > max / unit) {
    return std::nullopt;
  }
  return value * unit;
}

constexpr uint64_t kMaxBytes = uint64_t{1} << 48;
constexpr uint64_t kMaxChunkBytes = uint64_t{1} << 30;
constexpr uint64_t kMaxCacheCapacity = uint64_t{1} << 20;

// --- the table -----------------------------------------------------------------------------

using Parse = bool (*)(std::string_view value, EngineSettings& settings);

struct Row {
  EngineSettingRow doc;
  Parse parse;
};

constexpr Row kRows[] = {
    {{"THREELC_CYCLE_TIME_MS", "1", "a number of milliseconds > 0 and <= 1000 (fractions allowed)",
      "milliseconds between the background thread's negotiation cycles while operations are in "
      "flight (a rank with none waits for a submission, and cycles every 100 ms meanwhile)"},
     [](std::string_view value, EngineSettings& s) {
       const auto ms = parse_number(value);
       if (!ms || *ms <= 0 || *ms > 1000) return false;
       // At least 1 us, so that a tiny positive value never means "no wait".
       s.cycle_time = std::chrono::microseconds(std::max(1LL, std::llround(*ms * 1000.0)));
       return true;
     }},
    {{"THREELC_FUSION_THRESHOLD", "67108864",
      "an integer number of bytes (suffix K, M or G for KiB, MiB, GiB), 0 to disable fusion",
      "most bytes of tensors fused into one collective (64 MiB); 0 disables fusion"},
     [](std::string_view value, EngineSettings& s) {
       const auto bytes = parse_bytes(value, kMaxBytes);
       if (!bytes) return false;
       s.fusion_threshold = static_cast<size_t>(*bytes);
       return true;
     }},
    {{"THREELC_CHUNK_BYTES", "1048576",
      "an integer number of bytes (suffix K, M or G for KiB, MiB, GiB), a multiple of 4, from "
      "4096 to 1G",
      "fp32 bytes per streamed chunk (1 MiB: 262144 values of the fused buffer): compression of "
      "one chunk overlaps the sending of the previous one; every chunk of a tensor is one 3LC "
      "block, so smaller chunks send more messages; with THREELC_SCALE_TILE=0 a chunk is also "
      "one scale (docs/ACCURACY.md)"},
     [](std::string_view value, EngineSettings& s) {
       const auto bytes = parse_bytes(value, kMaxChunkBytes);
       if (!bytes || *bytes < 4096 || *bytes % 4 != 0) return false;
       s.chunk_bytes = static_cast<size_t>(*bytes);
       return true;
     }},
    {{"THREELC_COMPRESSION", "threelc", "threelc or none",
      "threelc: 3LC-compress float allreduces (sum, average) of at least "
      "THREELC_MIN_COMPRESS_BYTES; none: send every tensor raw"},
     [](std::string_view value, EngineSettings& s) {
       if (equals_ignoring_case(value, "threelc")) {
         s.compression = true;
       } else if (equals_ignoring_case(value, "none")) {
         s.compression = false;
       } else {
         return false;
       }
       return true;
     }},
    {{"THREELC_SPARSITY", "1.0", "a number in [1, 2)",
      "3LC sparsity multiplier s: larger values send fewer bytes and lose fidelity (1.0 "
      "keeps accuracy; see docs/BENCHMARKS.md)"},
     [](std::string_view value, EngineSettings& s) {
       const auto number = parse_number(value);
       if (!number || *number < 1.0 || *number >= 2.0) return false;
       const auto sparsity = static_cast<float>(*number);
       if (sparsity >= 2.0f) return false;  // 1.99999999999 rounds to 2 in fp32
       s.sparsity = sparsity;
       return true;
     }},
    {{"THREELC_SCALE_TILE", "320", "0, or a multiple of 5 from 5 to 20480",
      "values that share one 3LC scale: every tile of this many values has its own (block "
      "format v2), so small values that a block's largest would hold back are sent; 0 gives "
      "every block one scale (format v1, the paper's 3LC: fewer bytes, less accuracy; "
      "docs/ACCURACY.md)"},
     [](std::string_view value, EngineSettings& s) {
       const auto tile = parse_integer(value, compression::kTileValues);
       if (!tile || !compression::scale_tile_valid(*tile)) return false;
       s.scale_tile = static_cast<size_t>(*tile);
       return true;
     }},
    {{"THREELC_FEEDBACK_LIMIT", "100", "a number >= 0 and <= 1e12, 0 to disable",
      "every 8th compressed step of a tensor, each rank compares its largest error-feedback "
      "residual with the largest gradient of the last 8 such checks and logs an error (naming "
      "the tensor: lower the sparsity) when the residual is more than this many times larger; "
      "0 disables the check"},
     [](std::string_view value, EngineSettings& s) {
       const auto limit = parse_number(value);
       if (!limit || *limit < 0 || *limit > 1e12) return false;
       s.feedback_limit = *limit;
       return true;
     }},
    {{"THREELC_MIN_COMPRESS_BYTES", "1024",
      "an integer number of bytes (suffix K, M or G for KiB, MiB, GiB)",
      "float tensors smaller than this are sent raw (1 KiB)"},
     [](std::string_view value, EngineSettings& s) {
       const auto bytes = parse_bytes(value, kMaxBytes);
       if (!bytes) return false;
       s.min_compress_bytes = static_cast<size_t>(*bytes);
       return true;
     }},
    {{"THREELC_ALLREDUCE", "push_pull", "push_pull or ring",
      "push_pull: every element quantized twice (push to its segment's owner, pull around the "
      "ring); ring: classic ring that re-compresses at every hop (loses fidelity as ranks grow)"},
     [](std::string_view value, EngineSettings& s) {
       if (equals_ignoring_case(value, "push_pull")) {
         s.allreduce = AllreduceAlgorithm::kPushPull;
       } else if (equals_ignoring_case(value, "ring")) {
         s.allreduce = AllreduceAlgorithm::kRing;
       } else {
         return false;
       }
       return true;
     }},
    {{"THREELC_TIMELINE", "", "a file path (empty: no timeline)",
      "Chrome-trace JSON file rank 0 writes (open it in chrome://tracing or Perfetto); one "
      "row per tensor with its negotiate, compress, send, receive, decompress spans"},
     [](std::string_view value, EngineSettings& s) {
       s.timeline = std::string(value);
       return true;
     }},
    {{"THREELC_HOSTNAME", "", "a host name (empty: gethostname())",
      "the name this rank's host goes by when ranks are grouped into hosts (cross_rank, "
      "cross_size); ranks with the same name share a host"},
     [](std::string_view value, EngineSettings& s) {
       s.hostname = std::string(value);
       return true;
     }},
    {{"THREELC_STATS", "0", "0 or 1",
      "1: print this rank's statistics at shutdown (bytes on the wire, compression ratio, "
      "operations, time per phase)"},
     [](std::string_view value, EngineSettings& s) {
       if (value != "0" && value != "1") return false;
       s.stats = value == "1";
       return true;
     }},
    {{"THREELC_STALL_CHECK_TIME", "60",
      "a number of seconds >= 0 and <= 1000000 (fractions allowed), 0 to disable",
      "rank 0 warns about tensors that some ranks submitted and others have not for this many "
      "seconds, naming the missing ranks; 0 disables the check"},
     [](std::string_view value, EngineSettings& s) {
       const auto seconds = parse_number(value);
       if (!seconds || *seconds < 0 || *seconds > 1e6) return false;
       long long ms = std::llround(*seconds * 1000.0);
       if (ms == 0 && *seconds > 0) ms = 1;  // positive never means "disabled"
       s.stall_check_time = std::chrono::milliseconds(ms);
       return true;
     }},
    {{"THREELC_STALL_TIMEOUT", "600",
      "a number of seconds >= 0 and <= 1000000 (fractions allowed), 0 to disable",
      "a tensor that some ranks submitted and others have not for this many seconds fails with "
      "THREELC_EMISMATCH on the ranks that submitted it, naming the missing ranks and what they "
      "have pending (a name mismatch then fails on every rank instead of hanging); 0 waits "
      "forever"},
     [](std::string_view value, EngineSettings& s) {
       const auto seconds = parse_number(value);
       if (!seconds || *seconds < 0 || *seconds > 1e6) return false;
       long long ms = std::llround(*seconds * 1000.0);
       if (ms == 0 && *seconds > 0) ms = 1;  // positive never means "disabled"
       s.stall_timeout = std::chrono::milliseconds(ms);
       return true;
     }},
    {{"THREELC_LOG_LEVEL", "warning", "trace, debug, info, warning or error (any case)",
      "lowest level of the engine's messages written to stderr"},
     [](std::string_view value, EngineSettings& s) {
       const auto level = parse_log_level(value);
       if (!level) return false;
       s.log_level = *level;
       return true;
     }},
    {{"THREELC_CACHE_CAPACITY", "1024", "an integer from 0 to 1048576",
      "entries of the response cache, which lets repeated tensors skip full negotiation; 0 "
      "disables the cache"},
     [](std::string_view value, EngineSettings& s) {
       const auto entries = parse_integer(value, kMaxCacheCapacity);
       if (!entries) return false;
       s.cache_capacity = static_cast<size_t>(*entries);
       return true;
     }},
    {{"THREELC_NCCL", "1", "0 or 1",
      "1: uncompressed allreduces of CUDA tensors run over NCCL (loaded at run time: "
      "THREELC_NCCL_LIBRARY, else libnccl.so.2); 0: they are staged through host memory"},
     [](std::string_view value, EngineSettings& s) {
       if (value != "0" && value != "1") return false;
       s.nccl = value == "1";
       return true;
     }},
    {{"THREELC_NCCL_LIBRARY", "", "a library path or name (empty: libnccl.so.2)",
      "the NCCL library THREELC_NCCL loads (dlopen), e.g. the one PyTorch ships"},
     [](std::string_view value, EngineSettings& s) {
       s.nccl_library = std::string(value);
       return true;
     }},
    {{"THREELC_HIERARCHICAL", "0", "0 or 1",
      "1: compressed allreduces are summed exactly inside each host (reduce-scatter; NCCL for "
      "CUDA tensors), 3LC runs only between hosts, and an allgather inside each host follows; "
      "needs the same number (> 1) of ranks on every host, else it is ignored with a warning"},
     [](std::string_view value, EngineSettings& s) {
       if (value != "0" && value != "1") return false;
       s.hierarchical = value == "1";
       return true;
     }},
};

constexpr auto kDocRows = [] {
  std::array<EngineSettingRow, std::size(kRows)> rows{};
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = kRows[i].doc;
  return rows;
}();

}  // namespace

const char* allreduce_algorithm_name(AllreduceAlgorithm algorithm) {
  switch (algorithm) {
    case AllreduceAlgorithm::kPushPull:
      return "push_pull";
    case AllreduceAlgorithm::kRing:
      return "ring";
  }
  return "?";
}

std::span<const EngineSettingRow> engine_setting_rows() { return kDocRows; }

EngineSettings engine_settings_from(const EnvironmentLookup& lookup) {
  EngineSettings settings;
  for (const auto& row : kRows) {
    std::optional<std::string> value = lookup(row.doc.name);
    if (value && value->empty()) value.reset();
    const std::string text = value ? *value : std::string(row.doc.default_value);
    if (!row.parse(text, settings)) {
      throw std::invalid_argument("threelc: " + std::string(row.doc.name) + "='" + text +
                                  "' is not accepted: expected " + row.doc.accepted);
    }
  }
  return settings;
}

EngineSettings engine_settings_from_environment() {
  return engine_settings_from([](std::string_view name) -> std::optional<std::string> {
    const char* value = std::getenv(std::string(name).c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  });
}

}  // namespace threelc::engine
