// The single table of environment variables the engine reads, and engine_settings_from() over
// it. Nothing else in engine/ calls getenv() for a THREELC_* variable.
#include "settings.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <stdexcept>

#include "threelc/compression/codec.h"
#include "threelc/compression/settings.h"
#include "threelc/transport/transport.h"

namespace threelc::engine {
namespace {

using settings::parse_bytes;
using settings::parse_choice;
using settings::parse_flag;
using settings::parse_integer;
using settings::parse_number;
using settings::Type;

constexpr uint64_t kMaxBytes = uint64_t{1} << 48;
constexpr uint64_t kMaxChunkBytes = uint64_t{1} << 30;
constexpr uint64_t kMaxCacheCapacity = uint64_t{1} << 20;

// --- the table -----------------------------------------------------------------------------

using Parse = bool (*)(std::string_view value, EngineSettings& settings);

struct Row {
  settings::Setting doc;
  Parse parse;
};

constexpr Row kRows[] = {
    {{"THREELC_CYCLE_TIME_MS", Type::kMilliseconds, "1",
      "a number of milliseconds > 0 and <= 1000 (fractions allowed)",
      "milliseconds between the background thread's negotiation cycles while operations are in "
      "flight (fractions allowed, up to 1000); a rank with none waits for a submission, and cycles "
      "every 100 ms meanwhile",
      "milliseconds between the background thread's negotiation cycles while operations are in "
      "flight (kept to the microsecond, at least 1 us); a rank with none waits for a submission, "
      "and cycles every 100 ms meanwhile"},
     [](std::string_view value, EngineSettings& s) {
       const auto ms = parse_number(value);
       if (!ms || *ms <= 0 || *ms > 1000) return false;
       // At least 1 us, so that a tiny positive value never means "no wait".
       s.cycle_time = std::chrono::microseconds(std::max(1LL, std::llround(*ms * 1000.0)));
       return true;
     }},
    {{"THREELC_FUSION_THRESHOLD", Type::kBytes, "67108864",
      "an integer number of bytes (suffix K, M or G for KiB, MiB, GiB), 0 to disable fusion",
      "most bytes of tensors fused into one collective (64 MiB; `K`, `M`, `G` suffixes for KiB, "
      "MiB, GiB); 0 disables fusion",
      "most bytes of tensors fused into one collective; 0 disables fusion"},
     [](std::string_view value, EngineSettings& s) {
       const auto bytes = parse_bytes(value, kMaxBytes);
       if (!bytes) return false;
       s.fusion_threshold = static_cast<size_t>(*bytes);
       return true;
     }},
    {{"THREELC_CHUNK_BYTES", Type::kBytes, "1048576",
      "an integer number of bytes (suffix K, M or G for KiB, MiB, GiB), a multiple of 4, from "
      "4096 to 1G",
      "fp32 bytes per streamed chunk, so compression overlaps the wire (a multiple of 4, 4096 to "
      "1G); each chunk of a tensor is one 3LC block and message; with `THREELC_SCALE_TILE=0` also "
      "one scale ([docs/ACCURACY.md](docs/ACCURACY.md))",
      "bytes per streamed chunk, counted in fp32 values of the fused buffer (1 MiB: 262,144 "
      "values, whatever the tensors' dtype): compressing one chunk overlaps sending the previous "
      "one. Every chunk of a tensor is one 3LC block and one message. At the default "
      "`THREELC_SCALE_TILE` every 320 values have their own scale whatever the chunk; with "
      "`THREELC_SCALE_TILE=0` (one scale per block) smaller chunks keep more accuracy and send "
      "more bytes (`4K`, a scale per 1024 values: 34x instead of 72x, -0.52 pp instead of -1.45 pp "
      "against uncompressed training in docs/ACCURACY.md)"},
     [](std::string_view value, EngineSettings& s) {
       const auto bytes = parse_bytes(value, kMaxChunkBytes);
       if (!bytes || *bytes < 4096 || *bytes % 4 != 0) return false;
       s.chunk_bytes = static_cast<size_t>(*bytes);
       return true;
     }},
    {{"THREELC_COMPRESSION", Type::kChoice, "threelc", "threelc or none",
      "`threelc`: 3LC-compress float sum/average allreduces; `none`: send everything raw",
      "`threelc`: 3LC-compress float allreduces (sum, average) of at least "
      "`THREELC_MIN_COMPRESS_BYTES`; `none`: every tensor raw. Per call, "
      "`threelc_options.compression` overrides it"},
     [](std::string_view value, EngineSettings& s) {
       const auto choice = parse_choice(value, {"threelc", "none"});
       if (!choice) return false;
       s.compression = *choice == 0;
       return true;
     }},
    {{"THREELC_SPARSITY", Type::kNumber, "1.0", "a number in [1, 2)",
      "3LC sparsity multiplier s in [1, 2): larger sends fewer bytes and loses fidelity",
      "3LC sparsity multiplier s: larger values send fewer bytes and lose fidelity; traffic per s "
      "in docs/BENCHMARKS.md. Per call, `threelc_options.sparsity` overrides it"},
     [](std::string_view value, EngineSettings& s) {
       const auto number = parse_number(value);
       if (!number || *number < 1.0 || *number >= 2.0) return false;
       const auto sparsity = static_cast<float>(*number);
       if (sparsity >= 2.0f) return false;  // 1.99999999999 rounds to 2 in fp32
       s.sparsity = sparsity;
       return true;
     }},
    {{"THREELC_SCALE_TILE", Type::kInteger, "320", "0, or a multiple of 5 from 5 to 20480",
      "values that share one 3LC scale (a multiple of 5 up to 20480): each tile of that many "
      "values has its own, so small values are sent too; 0: one per block, the paper's 3LC (about "
      "half the bytes, 1-1.5 pp less accuracy; [docs/ACCURACY.md](docs/ACCURACY.md))",
      "values that share one 3LC scale. Every tile of this many values has its own scale (block "
      "format v2, docs/WIRE_FORMAT.md), so small values that a block's largest would hold back in "
      "the residuals are sent: at 320 (with `THREELC_MIN_COMPRESS_BYTES` at 1 KiB) the README's "
      "job trains as well as uncompressed training at 29-37x fewer bytes (docs/ACCURACY.md). 0: "
      "every block has one scale (block format v1, the paper's 3LC: the block's largest |value| "
      "sets the threshold of all of them), about half the bytes and 1-1.5 pp less accuracy on that "
      "job; finer tiles send more bytes, coarser ones lose accuracy (640: -0.72 pp)"},
     [](std::string_view value, EngineSettings& s) {
       const auto tile = parse_integer(value, compression::kTileValues);
       if (!tile || !compression::scale_tile_valid(*tile)) return false;
       s.scale_tile = static_cast<size_t>(*tile);
       return true;
     }},
    {{"THREELC_FEEDBACK_LIMIT", Type::kNumber, "100", "a number >= 0 and <= 1e12, 0 to disable",
      "log an error naming the tensor when its error feedback exceeds this many times its recent "
      "gradients (checked every 8th compressed step; lower the sparsity); 0 disables",
      "runaway error feedback: every 8th compressed step of a tensor (the 1st, 9th, 17th, ...) "
      "each rank compares E, the largest |residual| of its error buffer after the step, with Gref, "
      "the largest |value| it compressed in the last 8 such steps; E > limit * Gref is logged at "
      "ERROR level naming the rank, the tensor, the sparsity and both numbers (once per tensor, "
      "again when the ratio has doubled), and counted in the statistics. In steady training E "
      "stays within s / (2 - s) * G (19x at s = 1.9), so the default only fires on a residual far "
      "out of scale with the gradients; 0 disables the check. Gradients holding NaN/Inf are logged "
      "at WARNING level whatever the value (1st, 10th, 100th, ... time per tensor)"},
     [](std::string_view value, EngineSettings& s) {
       const auto limit = parse_number(value);
       if (!limit || *limit < 0 || *limit > 1e12) return false;
       s.feedback_limit = *limit;
       return true;
     }},
    {{"THREELC_MIN_COMPRESS_BYTES", Type::kBytes, "1024",
      "an integer number of bytes (suffix K, M or G for KiB, MiB, GiB)",
      "float tensors smaller than this are sent raw (1 KiB)",
      "float tensors smaller than this are sent raw (1 KiB: a model's biases and other tiny "
      "tensors; at 64 KiB the README's CNN sends 0.6 % of its values raw, about a sixth of the "
      "bytes it sends at the default scale tile)"},
     [](std::string_view value, EngineSettings& s) {
       const auto bytes = parse_bytes(value, kMaxBytes);
       if (!bytes) return false;
       s.min_compress_bytes = static_cast<size_t>(*bytes);
       return true;
     }},
    {{"THREELC_ALLREDUCE", Type::kChoice, "push_pull", "push_pull or ring",
      "`push_pull` (each element quantized twice) or `ring` (re-compresses at every hop; for "
      "comparison)",
      "`push_pull`: each element quantized twice (push to its segment's owner, pull around the "
      "ring); `ring`: the classic ring, re-compressing the partial sum at every hop (loses "
      "fidelity as ranks grow; for comparison)"},
     [](std::string_view value, EngineSettings& s) {
       const auto choice = parse_choice(value, {"push_pull", "ring"});
       if (!choice) return false;
       s.allreduce = *choice == 0 ? AllreduceAlgorithm::kPushPull : AllreduceAlgorithm::kRing;
       return true;
     }},
    {{"THREELC_TIMELINE", Type::kText, "", "a file path (empty: no timeline)",
      "Chrome-trace JSON file rank 0 writes; open it in chrome://tracing or ui.perfetto.dev",
      "Chrome-trace JSON file rank 0 writes (created or truncated; a path that cannot be opened "
      "fails `threelc_init()` naming it). One row per tensor with its spans; open it in "
      "chrome://tracing or ui.perfetto.dev. Flushed at least once a second, so a crashed run "
      "leaves a file both open"},
     [](std::string_view value, EngineSettings& s) {
       s.timeline = std::string(value);
       return true;
     }},
    {{"THREELC_HOSTNAME", Type::kText, "", "a host name (empty: gethostname())",
      "the name ranks are grouped into hosts by (cross_rank, cross_size)",
      "the name this rank's host goes by when ranks are grouped into hosts (`cross_rank`, "
      "`cross_size`)"},
     [](std::string_view value, EngineSettings& s) {
       s.hostname = std::string(value);
       return true;
     }},
    {{"THREELC_STATS", Type::kFlag, "0", "0 or 1",
      "1: print this rank's statistics at shutdown (wire bytes, compression ratio, time per phase)",
      "1: print this rank's statistics at shutdown: bytes sent and received, operations and "
      "tensors per kind, the compression ratio (input of the compressed operations times 2(N-1)/N, "
      "what an uncompressed allreduce sends per rank, over the bytes they sent), time per phase"},
     [](std::string_view value, EngineSettings& s) {
       const auto flag = parse_flag(value);
       if (!flag) return false;
       s.stats = *flag;
       return true;
     }},
    {{"THREELC_STALL_CHECK_TIME", Type::kSeconds, "60",
      "a number of seconds >= 0 and <= 1000000 (fractions allowed), 0 to disable",
      "seconds after which rank 0 warns about tensors some ranks have not submitted, naming them; "
      "0 disables",
      "rank 0 warns about every tensor that some ranks submitted and others have not for this "
      "long, naming the tensor, the waiting time, the ranks that submitted and the missing ones "
      "(`1-3, 5`); again after each further period; 0 disables"},
     [](std::string_view value, EngineSettings& s) {
       const auto seconds = parse_number(value);
       if (!seconds || *seconds < 0 || *seconds > 1e6) return false;
       long long ms = std::llround(*seconds * 1000.0);
       if (ms == 0 && *seconds > 0) ms = 1;  // positive never means "disabled"
       s.stall_check_time = std::chrono::milliseconds(ms);
       return true;
     }},
    {{"THREELC_STALL_TIMEOUT", Type::kSeconds, "600",
      "a number of seconds >= 0 and <= 1000000 (fractions allowed), 0 to disable",
      "seconds after which such a tensor fails with `THREELC_EMISMATCH` on the ranks that "
      "submitted it, naming the missing ranks and what they have pending; 0 waits forever",
      "a tensor that some ranks submitted and others (not joined) have not for this long since its "
      "first submission fails with `THREELC_EMISMATCH` on the ranks that submitted it: `tensor "
      "'grad.a' was submitted by rank 0 but not by rank 1 within 2.0 s (THREELC_STALL_TIMEOUT); "
      "rank 1 has 'grad.b' pending` (up to 4 missing ranks, 3 names each, including names of "
      "theirs that timed out just before). Rank 0 forgets it; the name can be submitted again. "
      "With differently named tensors on different ranks every rank fails instead of hanging. "
      "Joins never time out. 0 waits forever"},
     [](std::string_view value, EngineSettings& s) {
       const auto seconds = parse_number(value);
       if (!seconds || *seconds < 0 || *seconds > 1e6) return false;
       long long ms = std::llround(*seconds * 1000.0);
       if (ms == 0 && *seconds > 0) ms = 1;  // positive never means "disabled"
       s.stall_timeout = std::chrono::milliseconds(ms);
       return true;
     }},
    {{"THREELC_LOG_LEVEL", Type::kChoice, "warning",
      "trace, debug, info, warning or error (any case)",
      "`trace`, `debug`, `info`, `warning` or `error`: the engine's messages on stderr",
      "lowest level of the engine's messages on stderr, each line `[threelc <rank>] WARNING: ...`"},
     [](std::string_view value, EngineSettings& s) {
       const auto level = parse_log_level(value);
       if (!level) return false;
       s.log_level = *level;
       return true;
     }},
    {{"THREELC_CACHE_CAPACITY", Type::kInteger, "1024", "an integer from 0 to 1048576",
      "entries of the response cache (repeated tensors skip full negotiation); 0 disables it",
      "entries of the response cache, which lets tensors seen before skip full negotiation; 0 "
      "disables the cache"},
     [](std::string_view value, EngineSettings& s) {
       const auto entries = parse_integer(value, kMaxCacheCapacity);
       if (!entries) return false;
       s.cache_capacity = static_cast<size_t>(*entries);
       return true;
     }},
    {{"THREELC_NCCL", Type::kFlag, "1", "0 or 1",
      "1: uncompressed allreduces of CUDA tensors run over NCCL (loaded at run time: "
      "`THREELC_NCCL_LIBRARY`, else `libnccl.so.2`); 0: staged through host memory",
      "1: uncompressed allreduces of CUDA tensors (compression none, or under "
      "`THREELC_MIN_COMPRESS_BYTES`) run over NCCL, loaded at run time (`THREELC_NCCL_LIBRARY`, "
      "else `libnccl.so.2`); 0: they are staged through host memory and reduced by the engine. "
      "Joined ranks, prescale/postscale and integer averages are always staged"},
     [](std::string_view value, EngineSettings& s) {
       const auto flag = parse_flag(value);
       if (!flag) return false;
       s.nccl = *flag;
       return true;
     }},
    {{"THREELC_NCCL_LIBRARY", Type::kText, "", "a library path or name (empty: libnccl.so.2)",
      "the NCCL library `THREELC_NCCL` loads, e.g. the one PyTorch ships; empty: `libnccl.so.2`",
      "the NCCL library `THREELC_NCCL` loads with dlopen (e.g. the one PyTorch ships); empty: "
      "`libnccl.so.2`"},
     [](std::string_view value, EngineSettings& s) {
       s.nccl_library = std::string(value);
       return true;
     }},
    {{"THREELC_HIERARCHICAL", Type::kFlag, "0", "0 or 1",
      "1: compressed allreduces sum exactly inside each host (NCCL for CUDA tensors) and run 3LC "
      "only between hosts; needs the same number (> 1) of ranks on every host",
      "1: a compressed allreduce first sums the fused buffer exactly inside each host "
      "(reduce-scatter among the host's ranks: the engine's over the data channels for host "
      "tensors, NCCL for CUDA tensors), then each rank runs 3LC push_pull (or the ring, "
      "`THREELC_ALLREDUCE`) on its segment with one rank of every other host, then the host's "
      "ranks allgather the segments: L ranks per host send L times less compressed data between "
      "hosts. Hosts are told apart by `THREELC_HOSTNAME` (else the host name). Needs the same "
      "number (> 1) of ranks on every host; otherwise ignored with a warning from rank 0. Error "
      "feedback is kept per piece of tensor in a rank's segment (names "
      "`<tensor>#<first>+<count>`)"},
     [](std::string_view value, EngineSettings& s) {
       const auto flag = parse_flag(value);
       if (!flag) return false;
       s.hierarchical = *flag;
       return true;
     }},
};

constexpr auto kDocRows = [] {
  std::array<settings::Setting, std::size(kRows)> rows{};
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

std::span<const settings::Setting> engine_setting_rows() { return kDocRows; }

std::vector<settings::SettingTable> all_setting_tables() {
  return {
      {"engine", kDocRows}, transport::transport_settings(), compression::compression_settings()};
}

EngineSettings engine_settings_from(const EnvironmentLookup& lookup) {
  EngineSettings result;
  for (const auto& row : kRows) {
    const std::string text = settings::value_or_default(row.doc, lookup);
    if (!row.parse(text, result)) {
      throw std::invalid_argument("threelc: " + settings::refusal(row.doc, text));
    }
  }
  // The codec reads its own variable when it first runs; refuse a malformed one here already.
  compression::Isa isa = compression::Isa::kAuto;
  if (const auto status = compression::codec_isa_from(lookup, &isa); !status.ok()) {
    throw std::invalid_argument("threelc: " + status.message());
  }
  return result;
}

EngineSettings engine_settings_from_environment() {
  return engine_settings_from(settings::process_environment);
}

}  // namespace threelc::engine
