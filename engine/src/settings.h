// Every environment variable the engine reads, declared once in the table of settings_rows.cc
// (rows of the shape threelc/settings/row.h gives every layer): from that table come the parsing,
// the defaults and the documentation (README.md's and docs/CONFIGURATION.md's tables are
// generated from it). The transport's variables (rank, size, coordinator, secret, timeouts, ...)
// are in transport/src/settings_rows.h, the codec's in compression/src/settings.cc.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "observe/log.h"
#include "threelc/settings/row.h"

namespace threelc::engine {

enum class AllreduceAlgorithm : uint8_t {
  kPushPull,  // push to the segment's owner, reduce there, pull around the ring (docs/DESIGN.md)
  kRing,      // classic ring: re-compresses the partial sum at every hop
};

const char* allreduce_algorithm_name(AllreduceAlgorithm algorithm);  // "push_pull", "ring"

// The engine's configuration. A default-constructed one holds the rows' defaults (settings_rows.cc
// reads them with no variables set): no default is written here.
struct EngineSettings {
  EngineSettings();

  // THREELC_CYCLE_TIME_MS: how long the background thread waits between negotiation cycles.
  std::chrono::microseconds cycle_time{};
  // THREELC_FUSION_THRESHOLD: the most bytes fused into one collective; 0 disables fusion.
  size_t fusion_threshold = 0;
  // THREELC_CHUNK_BYTES: bytes of input per streamed chunk (a multiple of 4, >= 4096).
  size_t chunk_bytes = 0;
  // THREELC_COMPRESSION: compress eligible allreduces with 3LC (true) or send raw blocks.
  bool compression = false;
  // THREELC_SPARSITY: the 3LC sparsity multiplier s, in [1, 2).
  float sparsity = 0;
  // THREELC_SCALE_TILE: values that share one 3LC scale (0: one per block, format v1).
  size_t scale_tile = 0;
  // THREELC_FEEDBACK_LIMIT: a tensor's error feedback is reported as running away when its
  // largest residual exceeds this many times the largest recent gradient; zero disables.
  double feedback_limit = 0;
  // THREELC_MIN_COMPRESS_BYTES: smaller tensors are sent raw.
  size_t min_compress_bytes = 0;
  // THREELC_ALLREDUCE
  AllreduceAlgorithm allreduce{};
  // THREELC_TIMELINE: Chrome-trace file rank 0 writes; empty: no timeline.
  std::string timeline;
  // THREELC_HOSTNAME: this rank's host name for cross_rank / cross_size; empty: gethostname().
  std::string hostname;
  // THREELC_STATS: print this rank's statistics at shutdown.
  bool stats = false;
  // THREELC_STALL_CHECK_TIME: rank 0 warns about tensors some ranks submitted and others have
  // not for this long; zero disables the check.
  std::chrono::milliseconds stall_check_time{};
  // THREELC_STALL_TIMEOUT: rank 0 fails a tensor (THREELC_EMISMATCH on every rank that
  // submitted it) that some ranks submitted and others have not for this long; zero disables.
  std::chrono::milliseconds stall_timeout{};
  // THREELC_DEADLOCK_TIMEOUT: rank 0 fails every pending tensor when every rank has been
  // blocked waiting for operations that cannot run for this long; zero disables.
  std::chrono::milliseconds deadlock_timeout{};
  // THREELC_LOG_LEVEL
  LogLevel log_level{};
  // THREELC_CACHE_CAPACITY: entries of the response cache; 0 disables the cache.
  size_t cache_capacity = 0;
  // THREELC_NCCL: uncompressed allreduces of CUDA tensors over NCCL (else staged via the host).
  bool nccl = false;
  // THREELC_HIERARCHICAL: compressed allreduces sum inside each host first (exactly) and run
  // 3LC only between hosts, when every host runs the same number (> 1) of ranks.
  bool hierarchical = false;
  // THREELC_NCCL_LIBRARY: the NCCL library to load; empty: libnccl.so.2.
  std::string nccl_library;
};

// The table's rows with their parses (settings_rows.cc), in the order the docs list them.
std::span<const settings::Row<EngineSettings>> engine_rows();

// The table's documentation rows, in the order the docs list them.
std::span<const settings::Setting> engine_setting_rows();

// Every layer's table (engine, transport, compression), in the order the docs list them: what
// the C ABI's threelc_setting_at() walks.
std::vector<settings::SettingTable> all_setting_tables();

// The value of a variable; nullopt when it is not set. An empty value counts as unset.
using EnvironmentLookup = settings::EnvironmentLookup;

// Reads every variable of the table through `lookup`. Throws std::invalid_argument for the first
// malformed value, naming the variable, the value and what is accepted:
//   threelc: THREELC_CHUNK_BYTES='1000' is not accepted: expected an integer number of bytes ...
EngineSettings engine_settings_from(const EnvironmentLookup& lookup);

// engine_settings_from() over getenv().
EngineSettings engine_settings_from_environment();

}  // namespace threelc::engine
