#include "observe/timeline.h"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <system_error>

#include "collectives/observer.h"

namespace threelc::engine {
namespace {

constexpr int64_t kFlushIntervalNs = 1'000'000'000;

void append_integer(std::string& out, int64_t value) {
  char digits[24];
  const auto result = std::to_chars(digits, digits + sizeof digits, value);
  out.append(digits, result.ptr);
}

// The length of the valid UTF-8 sequence at text[i], or 0 when the bytes there are not one.
size_t utf8_sequence_length(std::string_view text, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char lead = byte(i);
  size_t length = 0;
  unsigned char low = 0x80;
  unsigned char high = 0xBF;  // range of the first continuation byte
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) low = 0xA0;   // no overlong forms
    if (lead == 0xED) high = 0x9F;  // no surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) low = 0x90;
    if (lead == 0xF4) high = 0x8F;  // nothing above U+10FFFF
  } else {
    return 0;
  }
  if (i + length > text.size()) return 0;
  if (byte(i + 1) < low || byte(i + 1) > high) return 0;
  for (size_t k = 2; k < length; ++k) {
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
  }
  return length;
}

}  // namespace

std::string json_escape(std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x80) {
      switch (c) {
        case '"':
          out += "\\\"";
          break;
        case '\\':
          out += "\\\\";
          break;
        case '\n':
          out += "\\n";
          break;
        case '\r':
          out += "\\r";
          break;
        case '\t':
          out += "\\t";
          break;
        default:
          if (c < 0x20 || c == 0x7F) {
            out += "\\u00";
            out += kHex[c >> 4];
            out += kHex[c & 0xF];
          } else {
            out += static_cast<char>(c);
          }
      }
      ++i;
      continue;
    }
    const size_t length = utf8_sequence_length(text, i);
    if (length == 0) {
      out += "\\ufffd";
      ++i;
    } else {
      out.append(text.substr(i, length));
      i += length;
    }
  }
  return out;
}

Timeline::Timeline(const std::string& path, int rank, int64_t start_ns)
    : path_(path), pid_(rank), start_ns_(start_ns >= 0 ? start_ns : steady_now_ns()) {
  last_flush_ns_ = start_ns_;
  file_ = std::fopen(path.c_str(), "w");
  if (file_ == nullptr) {
    throw std::runtime_error("threelc: cannot open the timeline file '" + path +
                             "' (THREELC_TIMELINE): " + std::strerror(errno));
  }
  write("[\n");
  begin_event();
  buffer_ += R"({"name":"process_name","ph":"M","pid":)";
  append_integer(buffer_, pid_);
  buffer_ += R"(,"args":{"name":"threelc rank )";
  append_integer(buffer_, rank);
  buffer_ += "\"}}";
  end_event(start_ns_);
  flush();
}

Timeline::~Timeline() {
  try {
    close();
  } catch (...) {  // NOLINT(bugprone-empty-catch): a destructor cannot report; close() can
  }
}

void Timeline::write(std::string_view text) {
  if (file_ == nullptr) return;
  if (std::fwrite(text.data(), 1, text.size(), file_) != text.size()) fail();
  dirty_ = true;
}

void Timeline::fail() {
  if (error_ == 0) error_ = errno != 0 ? errno : EIO;
}

void Timeline::begin_event() {
  buffer_.clear();
  if (!first_event_) buffer_ += ",\n";
  first_event_ = false;
}

void Timeline::end_event(int64_t now_ns) {
  write(buffer_);
  flush_if_due(now_ns);
}

void Timeline::write_time(int64_t ns) {
  // Exact decimal microseconds, independent of the C locale.
  int64_t relative = ns - start_ns_;
  if (relative < 0) {
    buffer_ += '-';
    relative = -relative;
  }
  append_integer(buffer_, relative / 1000);
  const auto fraction = static_cast<int>(relative % 1000);
  buffer_ += '.';
  buffer_ += static_cast<char>('0' + fraction / 100);
  buffer_ += static_cast<char>('0' + fraction / 10 % 10);
  buffer_ += static_cast<char>('0' + fraction % 10);
}

int Timeline::row(const std::string& tensor) {
  const auto found = rows_.find(tensor);
  if (found != rows_.end()) return found->second;
  const int tid = static_cast<int>(rows_.size()) + 1;
  rows_.emplace(tensor, tid);
  begin_event();
  buffer_ += R"({"name":"thread_name","ph":"M","pid":)";
  append_integer(buffer_, pid_);
  buffer_ += R"(,"tid":)";
  append_integer(buffer_, tid);
  buffer_ += R"(,"args":{"name":")";
  buffer_ += json_escape(tensor);
  buffer_ += "\"}}";
  // Rows in order of first use.
  buffer_ += ",\n";
  buffer_ += R"({"name":"thread_sort_index","ph":"M","pid":)";
  append_integer(buffer_, pid_);
  buffer_ += R"(,"tid":)";
  append_integer(buffer_, tid);
  buffer_ += R"(,"args":{"sort_index":)";
  append_integer(buffer_, tid);
  buffer_ += "}}";
  write(buffer_);
  return tid;
}

void Timeline::span(const std::string& tensor, std::string_view phase, int64_t begin_ns,
                    int64_t end_ns, size_t bytes, int peer) {
  if (file_ == nullptr) return;
  const int tid = row(tensor);
  begin_event();
  buffer_ += R"({"name":")";
  buffer_ += json_escape(phase);
  buffer_ += R"(","cat":"threelc","ph":"X","pid":)";
  append_integer(buffer_, pid_);
  buffer_ += R"(,"tid":)";
  append_integer(buffer_, tid);
  buffer_ += R"(,"ts":)";
  write_time(begin_ns);
  buffer_ += R"(,"dur":)";
  // A negative duration (clock misuse) would hide the event; show it as a point instead.
  write_time(start_ns_ + (end_ns > begin_ns ? end_ns - begin_ns : 0));
  if (bytes != 0 || peer >= 0) {
    buffer_ += R"(,"args":{)";
    if (bytes != 0) {
      buffer_ += R"("bytes":)";
      append_integer(buffer_, static_cast<int64_t>(bytes));
    }
    if (peer >= 0) {
      if (bytes != 0) buffer_ += ',';
      buffer_ += R"("peer":)";
      append_integer(buffer_, peer);
    }
    buffer_ += '}';
  }
  buffer_ += '}';
  end_event(steady_now_ns());
}

void Timeline::instant(const std::string& tensor, std::string_view name, int64_t at_ns) {
  if (file_ == nullptr) return;
  const int tid = row(tensor);
  begin_event();
  buffer_ += R"({"name":")";
  buffer_ += json_escape(name);
  buffer_ += R"(","cat":"threelc","ph":"i","s":"t","pid":)";
  append_integer(buffer_, pid_);
  buffer_ += R"(,"tid":)";
  append_integer(buffer_, tid);
  buffer_ += R"(,"ts":)";
  write_time(at_ns);
  buffer_ += '}';
  end_event(steady_now_ns());
}

void Timeline::counter(std::string_view name, int64_t at_ns, double value) {
  if (file_ == nullptr || !std::isfinite(value)) return;
  begin_event();
  buffer_ += R"({"name":")";
  buffer_ += json_escape(name);
  buffer_ += R"(","cat":"threelc","ph":"C","pid":)";
  append_integer(buffer_, pid_);
  buffer_ += R"(,"ts":)";
  write_time(at_ns);
  buffer_ += R"(,"args":{"value":)";
  char digits[32];
  const auto result = std::to_chars(digits, digits + sizeof digits, value);
  buffer_.append(digits, result.ptr);
  buffer_ += "}}";
  end_event(steady_now_ns());
}

void Timeline::flush_if_due(int64_t now_ns) {
  if (dirty_ && now_ns - last_flush_ns_ >= kFlushIntervalNs) {
    flush();
    last_flush_ns_ = now_ns;
  }
}

void Timeline::flush() {
  if (file_ == nullptr) return;
  if (std::fflush(file_) != 0) fail();
  dirty_ = false;
}

void Timeline::close() {
  if (file_ == nullptr) return;
  write("\n]\n");
  if (std::ferror(file_) != 0) fail();
  if (std::fclose(file_) != 0) fail();
  file_ = nullptr;
  if (error_ != 0) {
    throw std::runtime_error("threelc: writing the timeline file '" + path_ +
                             "' failed: " + std::strerror(error_));
  }
}

}  // namespace threelc::engine
