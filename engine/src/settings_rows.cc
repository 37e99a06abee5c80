// The single table of environment variables the engine reads: each row's documentation (the
// docs' tables are generated from it) and its parse into EngineSettings. The measured figures
// behind a row's advice stand in the docs it points to (docs/ACCURACY.md, docs/BENCHMARKS.md).
#include <array>
#include <stdexcept>

#include "settings.h"
#include "threelc/compression/codec.h"
#include "threelc/settings/row.h"

namespace threelc::engine {
namespace {

// --- vocabulary ------------------------------------------------------------------------------

using settings::assign;
using settings::assign_text;
using settings::parse_bytes;
using settings::parse_choice_value;
using settings::parse_flag;
using settings::parse_integer;
using settings::parse_milliseconds;
using settings::parse_number;
using settings::parse_seconds;
using settings::Range;
using settings::Type;
using Row = settings::Row<EngineSettings>;

constexpr uint64_t kMaxBytes = uint64_t{1} << 48;
constexpr uint64_t kMaxChunkBytes = uint64_t{1} << 30;
constexpr uint64_t kMaxCacheCapacity = uint64_t{1} << 20;
constexpr Range kCycleMilliseconds{.low = 0, .high = 1000, .low_open = true};
constexpr Range kWatchSeconds{.low = 0, .high = 1e6};  // the stall and deadlock checks; 0: off
constexpr Range kSparsity{.low = 1, .high = 2, .high_open = true};
constexpr Range kFeedbackLimit{.low = 0, .high = 1e12};
constexpr const char* kWatchAccepted =
    "a number of seconds >= 0 and <= 1000000 (fractions allowed), 0 to disable";

// The parse of the stall and deadlock checks' rows: seconds into `Field`, 0 for off.
template <auto Field>
bool watch_seconds(std::string_view v, EngineSettings& s) {
  return assign(s.*Field, parse_seconds(v, kWatchSeconds));
}

// --- the table -------------------------------------------------------------------------------

constexpr std::array kRows = {
    Row{{"THREELC_CYCLE_TIME_MS", Type::kMilliseconds, "1",
         "a number of milliseconds > 0 and <= 1000 (fractions allowed)",
         "milliseconds between the background thread's negotiation cycles while operations are "
         "in flight (fractions allowed, up to 1000); a rank with none waits for a submission, and "
         "cycles every 100 ms meanwhile",
         "milliseconds between the background thread's negotiation cycles while operations are "
         "in flight (rounded up to the microsecond); a rank with none waits for a submission, and "
         "cycles every 100 ms meanwhile"},
        [](std::string_view v, EngineSettings& s) {
          return assign(s.cycle_time, parse_milliseconds(v, kCycleMilliseconds));
        }},
    Row{{"THREELC_FUSION_THRESHOLD", Type::kBytes, "67108864",
         "an integer number of bytes (suffix K, M or G for KiB, MiB, GiB), 0 to disable fusion",
         "most bytes of tensors fused into one collective (64 MiB; `K`, `M`, `G` suffixes for "
         "KiB, MiB, GiB); 0 disables fusion",
         "most bytes of tensors fused into one collective; 0 disables fusion"},
        [](std::string_view v, EngineSettings& s) {
          return assign(s.fusion_threshold, parse_bytes(v, kMaxBytes));
        }},
    Row{{"THREELC_CHUNK_BYTES", Type::kBytes, "1048576",
         "an integer number of bytes (suffix K, M or G for KiB, MiB, GiB), a multiple of 4, from "
         "4096 to 1G",
         "fp32 bytes per streamed chunk, so compression overlaps the wire (a multiple of 4, 4096 "
         "to 1G); each chunk of a tensor is one 3LC block and message; with "
         "`THREELC_SCALE_TILE=0` also one scale ([docs/ACCURACY.md](docs/ACCURACY.md))",
         "bytes per streamed chunk, counted in fp32 values of the fused buffer (1 MiB: 262,144 "
         "values, whatever the tensors' dtype): compressing one chunk overlaps sending the "
         "previous one. Every chunk of a tensor is one 3LC block and one message. With "
         "`THREELC_SCALE_TILE=0` a chunk is also one scale, so smaller chunks keep more accuracy "
         "and send more bytes; what that costs is in docs/ACCURACY.md"},
        [](std::string_view v, EngineSettings& s) {
          const auto bytes = parse_bytes(v, kMaxChunkBytes);
          if (bytes && (*bytes < 4096 || *bytes % 4 != 0)) return false;
          return assign(s.chunk_bytes, bytes);
        }},
    Row{{"THREELC_COMPRESSION", Type::kChoice, "threelc", "threelc or none",
         "`threelc`: 3LC-compress float sum/average allreduces; `none`: send everything raw",
         "`threelc`: 3LC-compress float allreduces (sum, average) of at least "
         "`THREELC_MIN_COMPRESS_BYTES`; `none`: every tensor raw. Per call, "
         "`threelc_options.compression` overrides it"},
        [](std::string_view v, EngineSettings& s) {
          return assign(s.compression,
                        parse_choice_value<bool>(v, {{"threelc", true}, {"none", false}}));
        }},
    Row{{"THREELC_SPARSITY", Type::kNumber, "1.0", "a number in [1, 2)",
         "3LC sparsity multiplier s in [1, 2): larger sends fewer bytes and loses fidelity",
         "3LC sparsity multiplier s: larger values send fewer bytes and lose fidelity; traffic "
         "per s in docs/BENCHMARKS.md. Per call, `threelc_options.sparsity` overrides it"},
        [](std::string_view v, EngineSettings& s) {
          const auto number = parse_number(v, kSparsity);
          // 1.99999999999 rounds to 2 in fp32
          if (number && static_cast<float>(*number) >= 2.0f) return false;
          return assign(s.sparsity, number);
        }},
    Row{{"THREELC_SCALE_TILE", Type::kInteger, "320", "0, or a multiple of 5 from 5 to 20480",
         "values that share one 3LC scale (a multiple of 5 up to 20480): each tile of that many "
         "values has its own, so small values are sent too; 0: one per block, the paper's 3LC "
         "(about half the bytes, less accuracy; [docs/ACCURACY.md](docs/ACCURACY.md))",
         "values that share one 3LC scale. Every tile of this many values has its own scale "
         "(block format v2, docs/WIRE_FORMAT.md), so small values that a block's largest would "
         "hold back in the residuals are sent. 0: every block has one scale (block format v1, "
         "the paper's 3LC: the block's largest |value| sets the threshold of all of them). Finer "
         "tiles send more bytes, coarser ones lose accuracy; the bytes and the accuracy of each "
         "choice are in docs/ACCURACY.md"},
        [](std::string_view v, EngineSettings& s) {
          const auto tile = parse_integer(v, compression::kTileValues);
          if (tile && !compression::scale_tile_valid(*tile)) return false;
          return assign(s.scale_tile, tile);
        }},
    Row{{"THREELC_FEEDBACK_LIMIT", Type::kNumber, "100", "a number >= 0 and <= 1e12, 0 to disable",
         "log an error naming the tensor when its error feedback exceeds this many times its "
         "recent gradients (checked every 8th compressed step; lower the sparsity); 0 disables",
         "runaway error feedback: every 8th compressed step of a tensor each rank compares the "
         "largest |residual| of its residual buffer with the largest |value| it compressed in the "
         "last 8 such steps, and logs an ERROR naming the rank, the tensor, the sparsity and both "
         "numbers when the ratio exceeds this limit (counted in the statistics); 0 disables the "
         "check. Why the default only fires far out of scale, and the warnings for NaN/Inf "
         "gradients: docs/ARCHITECTURE.md, \"Error-feedback monitor\""},
        [](std::string_view v, EngineSettings& s) {
          return assign(s.feedback_limit, parse_number(v, kFeedbackLimit));
        }},
    Row{{"THREELC_MIN_COMPRESS_BYTES", Type::kBytes, "1024",
         "an integer number of bytes (suffix K, M or G for KiB, MiB, GiB)",
         "float tensors smaller than this are sent raw (1 KiB)",
         "float tensors smaller than this are sent raw (1 KiB: a model's biases and other tiny "
         "tensors); what a larger threshold sends raw is in docs/ACCURACY.md"},
        [](std::string_view v, EngineSettings& s) {
          return assign(s.min_compress_bytes, parse_bytes(v, kMaxBytes));
        }},
    Row{{"THREELC_ALLREDUCE", Type::kChoice, "push_pull", "push_pull or ring",
         "`push_pull` (each element quantized twice) or `ring` (re-compresses at every hop; for "
         "comparison)",
         "`push_pull`: each element quantized twice (push to its segment's owner, pull around the "
         "ring); `ring`: the classic ring, re-compressing the partial sum at every hop (loses "
         "fidelity as ranks grow; for comparison)"},
        [](std::string_view v, EngineSettings& s) {
          return assign(s.allreduce, parse_choice_value<AllreduceAlgorithm>(
                                         v, {{"push_pull", AllreduceAlgorithm::kPushPull},
                                             {"ring", AllreduceAlgorithm::kRing}}));
        }},
    Row{{"THREELC_TIMELINE", Type::kText, "", "a file path (empty: no timeline)",
         "Chrome-trace JSON file rank 0 writes; open it in chrome://tracing or ui.perfetto.dev",
         "Chrome-trace JSON file rank 0 writes (created or truncated; a path that cannot be "
         "opened fails `threelc_init()` naming it). One row per tensor with its spans; open it in "
         "chrome://tracing or ui.perfetto.dev. Flushed at least once a second, so a crashed run "
         "leaves a file both open"},
        [](std::string_view v, EngineSettings& s) { return assign_text(s.timeline, v); }},
    Row{{"THREELC_HOSTNAME", Type::kText, "", "a host name (empty: gethostname())",
         "the name ranks are grouped into hosts by (cross_rank, cross_size)",
         "the name this rank's host goes by when ranks are grouped into hosts (`cross_rank`, "
         "`cross_size`)"},
        [](std::string_view v, EngineSettings& s) { return assign_text(s.hostname, v); }},
    Row{{"THREELC_STATS", Type::kFlag, "0", "0 or 1",
         "1: print this rank's statistics at shutdown (wire bytes, compression ratio, time per "
         "phase)",
         "1: print this rank's statistics at shutdown: bytes sent and received, collectives and "
         "tensors per kind, the compression ratio (input of the compressed collectives times "
         "2(N-1)/N, what an uncompressed allreduce sends per rank, over the bytes they sent), "
         "time per phase"},
        [](std::string_view v, EngineSettings& s) { return assign(s.stats, parse_flag(v)); }},
    Row{{"THREELC_STALL_CHECK_TIME", Type::kSeconds, "60", kWatchAccepted,
         "seconds after which rank 0 warns about tensors some ranks have not submitted, naming "
         "them; 0 disables",
         "rank 0 warns about every tensor that some ranks submitted and others have not for this "
         "long, naming the tensor, the waiting time, the ranks that submitted and the missing "
         "ones (`1-3, 5`); again after each further period; 0 disables"},
        watch_seconds<&EngineSettings::stall_check_time>},
    Row{{"THREELC_STALL_TIMEOUT", Type::kSeconds, "600", kWatchAccepted,
         "seconds after which such a tensor fails with `THREELC_EMISMATCH` on the ranks that "
         "submitted it, naming the missing ranks and what they have pending; 0 waits forever",
         "a tensor that some ranks submitted and others (not joined) have not for this long "
         "since its first submission fails with `THREELC_EMISMATCH` on the ranks that submitted "
         "it, naming the missing ranks and up to 3 names each of what they have pending (the "
         "message: docs/ARCHITECTURE.md, \"Negotiation\"). Rank 0 forgets it; the name can be "
         "submitted again. Joins never time out. 0 waits forever"},
        watch_seconds<&EngineSettings::stall_timeout>},
    Row{{"THREELC_DEADLOCK_TIMEOUT", Type::kSeconds, "30", kWatchAccepted,
         "seconds every rank may be blocked waiting for operations that cannot run before they "
         "fail with `THREELC_EMISMATCH`, naming what each rank waits for; 0 disables",
         "a deadlock: when every rank that has not joined has a thread blocked waiting for its "
         "operations and nothing runs for this long, every pending tensor fails with "
         "`THREELC_EMISMATCH`, naming what each rank waits for (docs/ARCHITECTURE.md, "
         "\"Negotiation\"); 0 disables the check. The engine's own timeout, apart from "
         "`THREELC_TIMEOUT`, which bounds the transport's waits (both default to 30 s)"},
        watch_seconds<&EngineSettings::deadlock_timeout>},
    Row{{"THREELC_LOG_LEVEL", Type::kChoice, "warning",
         "trace, debug, info, warning or error (any case)",
         "`trace`, `debug`, `info`, `warning` or `error`: the engine's messages on stderr",
         "lowest level of the engine's messages on stderr, each line `[threelc <rank>] WARNING: "
         "...`"},
        [](std::string_view v, EngineSettings& s) {
          return assign(s.log_level, parse_log_level(v));
        }},
    Row{{"THREELC_CACHE_CAPACITY", Type::kInteger, "1024", "an integer from 0 to 1048576",
         "entries of the response cache (repeated tensors skip full negotiation); 0 disables it",
         "entries of the response cache, which lets tensors seen before skip full negotiation; 0 "
         "disables the cache"},
        [](std::string_view v, EngineSettings& s) {
          return assign(s.cache_capacity, parse_integer(v, kMaxCacheCapacity));
        }},
    Row{{"THREELC_NCCL", Type::kFlag, "1", "0 or 1",
         "1: uncompressed allreduces of CUDA tensors run over NCCL (loaded at run time: "
         "`THREELC_NCCL_LIBRARY`, else `libnccl.so.2`); 0: staged through host memory",
         "1: uncompressed allreduces of CUDA tensors (compression none, or under "
         "`THREELC_MIN_COMPRESS_BYTES`) run over NCCL, loaded at run time "
         "(`THREELC_NCCL_LIBRARY`, else `libnccl.so.2`); 0: they are staged through host memory "
         "and reduced by the engine. Joined ranks, prescale/postscale and integer averages are "
         "always staged"},
        [](std::string_view v, EngineSettings& s) { return assign(s.nccl, parse_flag(v)); }},
    Row{{"THREELC_NCCL_LIBRARY", Type::kText, "", "a library path or name (empty: libnccl.so.2)",
         "the NCCL library `THREELC_NCCL` loads, e.g. the one PyTorch ships; empty: "
         "`libnccl.so.2`",
         "the NCCL library `THREELC_NCCL` loads with dlopen (e.g. the one PyTorch ships); empty: "
         "`libnccl.so.2`"},
        [](std::string_view v, EngineSettings& s) { return assign_text(s.nccl_library, v); }},
    Row{{"THREELC_HIERARCHICAL", Type::kFlag, "0", "0 or 1",
         "1: compressed allreduces sum exactly inside each host (NCCL for CUDA tensors) and run "
         "3LC only between hosts; needs the same number (> 1) of ranks on every host",
         "1: a compressed allreduce first sums the fused buffer exactly inside each host (the "
         "engine's reduce-scatter for host tensors, NCCL's for CUDA tensors), runs 3LC between "
         "hosts on each rank's segment, then the host's ranks allgather the segments: L ranks "
         "per host send L times less compressed data between hosts (docs/ARCHITECTURE.md, "
         "\"Hierarchical allreduce\"). "
         "Hosts are told apart by `THREELC_HOSTNAME` (else the host name). Needs the same number "
         "(> 1) of ranks on every host; otherwise ignored with a warning from rank 0"},
        [](std::string_view v, EngineSettings& s) {
          return assign(s.hierarchical, parse_flag(v));
        }},
};

constexpr auto kDocRows = settings::documentation(kRows);

}  // namespace

std::span<const settings::Row<EngineSettings>> engine_rows() { return kRows; }

std::span<const settings::Setting> engine_setting_rows() { return kDocRows; }

}  // namespace threelc::engine
