// THREELC_TIMELINE: a Chrome trace of what this rank's engine did, in the JSON-array form that
// chrome://tracing and Perfetto (ui.perfetto.dev) open. One process (pid = rank) with one row
// (tid) per tensor, named after the tensor by a thread_name metadata event written on the row's
// first use; spans are complete ("X") events named after the phase.
//
// Events are written as they come and flushed at least once per second while events arrive (and
// by flush_if_due() from the background loop), so a run that crashes leaves a file whose only
// defect is the missing final "]", which both viewers accept. close() writes it: the file is then
// valid JSON.
//
// Not thread-safe, on purpose: only the engine's background thread calls it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <unordered_map>

namespace threelc::engine {

class Timeline {
 public:
  // Creates (truncates) the file. Times passed to the methods are steady_clock nanoseconds (see
  // steady_now_ns() in collectives/observer.h); the trace's time 0 is `start_ns`. Throws
  // std::runtime_error naming the path and the system's reason when it cannot be opened.
  explicit Timeline(const std::string& path, int rank = 0, int64_t start_ns = -1);
  ~Timeline();  // close(), ignoring errors
  Timeline(const Timeline&) = delete;
  Timeline& operator=(const Timeline&) = delete;

  // A complete event on `tensor`'s row from begin_ns to end_ns; its args carry `bytes` when
  // non-zero and `peer` when >= 0.
  void span(const std::string& tensor, std::string_view phase, int64_t begin_ns, int64_t end_ns,
            size_t bytes = 0, int peer = -1);
  // A point in time on `tensor`'s row.
  void instant(const std::string& tensor, std::string_view name, int64_t at_ns);
  // A counter track (e.g. bytes in flight); non-finite values are skipped.
  void counter(std::string_view name, int64_t at_ns, double value);

  // Flushes when the last flush is a second old or more; the background loop calls it once per
  // cycle so that the events before a stall reach the file.
  void flush_if_due(int64_t now_ns);
  void flush();

  // Ends the JSON array and closes the file; later calls do nothing. Throws std::runtime_error
  // naming the path when any write failed (disk full, ...).
  void close();
  bool is_open() const { return file_ != nullptr; }
  const std::string& path() const { return path_; }

 private:
  int row(const std::string& tensor);  // the tensor's tid; writes its metadata on first use
  void begin_event();                  // the separator before an event
  void end_event(int64_t now_ns);
  void write(std::string_view text);
  void fail();                  // records errno of a failed write
  void write_time(int64_t ns);  // microseconds since start_ns_, 3 decimals

  std::string path_;
  std::FILE* file_ = nullptr;
  int pid_;
  int64_t start_ns_;
  int64_t last_flush_ns_;
  bool first_event_ = true;
  bool dirty_ = false;  // written since the last flush
  int error_ = 0;       // errno of the first failed write or flush
  std::unordered_map<std::string, int> rows_;
  std::string buffer_;  // the event being formatted
};

// `text` as the inside of a JSON string: quotes, backslashes and control characters escaped;
// bytes that are not valid UTF-8 become U+FFFD, so the file stays valid JSON whatever the name.
std::string json_escape(std::string_view text);

}  // namespace threelc::engine
