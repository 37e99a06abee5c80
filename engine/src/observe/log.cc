#include "observe/log.h"

#include <array>
#include <cctype>
#include <string>

namespace threelc::engine {
namespace {

constexpr std::array<const char*, 5> kLevelNames = {"TRACE", "DEBUG", "INFO", "WARNING", "ERROR"};

}  // namespace

const char* log_level_name(LogLevel level) {
  const auto index = static_cast<size_t>(level);
  return index < kLevelNames.size() ? kLevelNames[index] : "?";
}

std::optional<LogLevel> parse_log_level(std::string_view text) {
  for (size_t i = 0; i < kLevelNames.size(); ++i) {
    const std::string_view name = kLevelNames[i];
    if (text.size() != name.size()) continue;
    bool equal = true;
    for (size_t j = 0; j < text.size() && equal; ++j) {
      equal = std::toupper(static_cast<unsigned char>(text[j])) == name[j];
    }
    if (equal) return static_cast<LogLevel>(i);
  }
  return std::nullopt;
}

Logger::Logger(LogLevel level, int rank, std::FILE* sink)
    : level_(level), rank_(rank), sink_(sink) {}

void Logger::log(LogLevel level, std::string_view message) const {
  if (!enabled(level) || sink_ == nullptr) return;
  std::string prefix = rank_ >= 0 ? "[threelc " + std::to_string(rank_) + "] " : "[threelc] ";
  prefix += log_level_name(level);
  prefix += ": ";
  // Trailing newlines would make empty prefixed lines.
  while (!message.empty() && message.back() == '\n') message.remove_suffix(1);
  std::string text;
  text.reserve(prefix.size() + message.size() + 1);
  size_t start = 0;
  for (;;) {
    const size_t end = message.find('\n', start);
    text += prefix;
    text.append(message.substr(start, end == std::string_view::npos ? end : end - start));
    text += '\n';
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  // One call: stdio locks the stream for it, so concurrent messages never interleave.
  std::fwrite(text.data(), 1, text.size(), sink_);
  if (sink_ == stderr) return;  // unbuffered already
  std::fflush(sink_);
}

}  // namespace threelc::engine
