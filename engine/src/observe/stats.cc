#include "observe/stats.h"

#include <array>
#include <cstdio>

namespace threelc::engine {
namespace {

constexpr std::array<const char*, kStatsPhaseCount> kPhaseNames = {
    "negotiate", "fusion copy", "compress", "decompress", "reduce", "send", "receive"};

std::string format_bytes(uint64_t bytes) {
  constexpr std::array<const char*, 5> kUnits = {"B", "KiB", "MiB", "GiB", "TiB"};
  auto value = static_cast<double>(bytes);
  size_t unit = 0;
  while (value >= 1024.0 && unit + 1 < kUnits.size()) {
    value /= 1024.0;
    ++unit;
  }
  char text[32];
  if (unit == 0) {
    std::snprintf(text, sizeof text, "%llu B", static_cast<unsigned long long>(bytes));
  } else {
    std::snprintf(text, sizeof text, "%.2f %s", value, kUnits[unit]);
  }
  return text;
}

std::string format_seconds(int64_t ns) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3f s", static_cast<double>(ns) * 1e-9);
  return text;
}

void add(Stats::Totals& totals, size_t tensors, size_t input_bytes, size_t wire_bytes) {
  ++totals.collectives;
  totals.tensors += tensors;
  totals.input_bytes += input_bytes;
  totals.wire_bytes += wire_bytes;
}

}  // namespace

const char* stats_phase_name(StatsPhase phase) {
  const auto i = static_cast<size_t>(phase);
  return i < kPhaseNames.size() ? kPhaseNames[i] : "?";
}

Stats::Stats(int size) : size_(size) {}

void Stats::record(const PhaseEvent& event) {
  const int64_t duration = event.end_ns > event.begin_ns ? event.end_ns - event.begin_ns : 0;
  StatsPhase phase = StatsPhase::kCompress;
  switch (event.phase) {
    case Phase::kCompress:
      phase = StatsPhase::kCompress;
      break;
    case Phase::kDecompress:
      phase = StatsPhase::kDecompress;
      break;
    case Phase::kSend:
      phase = StatsPhase::kSend;
      bytes_sent_ += event.bytes;
      break;
    case Phase::kReceive:
      phase = StatsPhase::kReceive;
      bytes_received_ += event.bytes;
      break;
    case Phase::kReduce:
      phase = StatsPhase::kReduce;
      break;
    case Phase::kCopy:
      phase = StatsPhase::kFusionCopy;
      break;
  }
  phase_ns_[index(phase)] += duration;
}

void Stats::add_cycle(int64_t ns) {
  ++cycles_;
  loop_ns_ += ns;
}

void Stats::collective_done(std::string_view kind, size_t tensors, size_t input_bytes,
                            bool compressed, size_t wire_bytes_sent) {
  auto found = by_kind_.find(kind);
  if (found == by_kind_.end()) found = by_kind_.emplace(std::string(kind), Totals{}).first;
  add(found->second, tensors, input_bytes, wire_bytes_sent);
  add(compressed ? compressed_ : uncompressed_, tensors, input_bytes, wire_bytes_sent);
}

double Stats::compression_ratio() const {
  if (size_ < 2 || compressed_.wire_bytes == 0) return 0;
  const double uncompressed_wire =
      2.0 * (size_ - 1) / size_ * static_cast<double>(compressed_.input_bytes);
  return uncompressed_wire / static_cast<double>(compressed_.wire_bytes);
}

std::string Stats::report(int rank) const {
  std::string out =
      "statistics of rank " + std::to_string(rank) + " (" + std::to_string(size_) + " ranks):";
  out += "\n  collectives:";
  if (by_kind_.empty()) out += " none";
  bool first = true;
  for (const auto& [kind, totals] : by_kind_) {
    out += first ? " " : ", ";
    first = false;
    out += kind + " " + std::to_string(totals.collectives) + " (" + std::to_string(totals.tensors) +
           " tensors, " + format_bytes(totals.input_bytes) + ")";
  }
  out +=
      "\n  wire: sent " + format_bytes(bytes_sent_) + ", received " + format_bytes(bytes_received_);
  out += "\n  3LC-compressed: " + std::to_string(compressed_.tensors) + " tensors, " +
         format_bytes(compressed_.input_bytes) + " of input, " +
         format_bytes(compressed_.wire_bytes) + " sent";
  if (const double ratio = compression_ratio(); ratio > 0) {
    char text[96];
    std::snprintf(text, sizeof text, "; %.1fx less traffic than uncompressed", ratio);
    out += text;
  }
  out += "\n  uncompressed: " + std::to_string(uncompressed_.tensors) + " tensors, " +
         format_bytes(uncompressed_.input_bytes) + " of input, " +
         format_bytes(uncompressed_.wire_bytes) + " sent";
  if (feedback_runaways_ > 0 || non_finite_steps_ > 0) {
    out += "\n  3LC error feedback: " + std::to_string(non_finite_steps_) +
           " tensor steps with NaN/Inf (sent raw), " + std::to_string(feedback_runaways_) +
           " sampled steps with a runaway residual (see the log)";
  }
  out += "\n  time: background loop " + format_seconds(loop_ns_) + " in " +
         std::to_string(cycles_) + " cycles;";
  for (size_t i = 0; i < kPhaseNames.size(); ++i) {
    out += i == 0 ? " " : ", ";
    out += kPhaseNames[i];
    out += ' ';
    out += format_seconds(phase_ns_[i]);
  }
  out += " (sends overlap the rest)\n";
  return out;
}

}  // namespace threelc::engine
