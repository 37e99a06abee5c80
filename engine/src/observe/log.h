// The engine's leveled logger: one line per message on stderr, "[threelc <rank>] LEVEL: ...".
// THREELC_LOG_LEVEL (settings.h) picks the lowest level written.
#pragma once

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string_view>

namespace threelc::engine {

// Ordered: a logger writes the messages at or above its level.
enum class LogLevel : uint8_t { kTrace = 0, kDebug = 1, kInfo = 2, kWarning = 3, kError = 4 };

const char* log_level_name(LogLevel level);  // "TRACE", "DEBUG", "INFO", "WARNING", "ERROR"

// "trace", "debug", "info", "warning", "error" in any case; nullopt for anything else.
std::optional<LogLevel> parse_log_level(std::string_view text);

// Safe to use from any thread: each message (all its lines) is written with one fwrite, so lines
// from different threads never interleave. Cheap to copy.
class Logger {
 public:
  // rank < 0 (not known yet) writes "[threelc] ". `sink` is stderr unless a test passes a file.
  Logger(LogLevel level, int rank, std::FILE* sink = stderr);

  bool enabled(LogLevel level) const { return level >= level_; }
  // Writes the message when enabled. A message of several lines gets the prefix on every line.
  void log(LogLevel level, std::string_view message) const;

  LogLevel level() const { return level_; }
  int rank() const { return rank_; }

 private:
  LogLevel level_;
  int rank_;
  std::FILE* sink_;
};

}  // namespace threelc::engine
