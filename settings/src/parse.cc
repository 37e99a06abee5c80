// The value parsers every layer's settings use: strict (no signs, spaces or trailing text), and
// nullopt for anything they do not accept, so that the caller refuses it naming the variable.
#include <cctype>
#include <charconv>
#include <cmath>
#include <system_error>

#include "threelc/settings/setting.h"

namespace threelc::settings {
namespace {

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

// `value` in units of 1/`per` (seconds to milliseconds: 1000), rounded up. The factor absorbs
// the binary error of a decimal that names a whole unit exactly (1.1 s is 1100 ms, not 1101);
// a positive value below one unit still becomes 1.
long long whole_units_up(double value, double per) {
  return static_cast<long long>(std::ceil(value * per * (1.0 - 1e-12)));
}

}  // namespace

bool Range::contains(double value) const {
  if (low_open ? value <= low : value < low) return false;
  if (high_open ? value >= high : value > high) return false;
  return true;
}

std::optional<uint64_t> parse_integer(std::string_view text, uint64_t min, uint64_t max) {
  const auto value = parse_integer(text, max);
  if (!value || *value < min) return std::nullopt;
  return value;
}

std::optional<uint64_t> parse_integer(std::string_view text, uint64_t max) {
  if (text.empty() || !std::isdigit(static_cast<unsigned char>(text.front()))) return std::nullopt;
  uint64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value, 10);
  if (error != std::errc() || end != text.data() + text.size() || value > max) return std::nullopt;
  return value;
}

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
  const auto value = parse_integer(text, max / unit);
  if (!value) return std::nullopt;
  return *value * unit;
}

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

std::optional<double> parse_number(std::string_view text, Range range) {
  const auto value = parse_number(text);
  if (!value || !range.contains(*value)) return std::nullopt;
  return value;
}

std::optional<std::chrono::milliseconds> parse_seconds(std::string_view text, Range range) {
  const auto seconds = parse_number(text, range);
  if (!seconds) return std::nullopt;
  return std::chrono::milliseconds(whole_units_up(*seconds, 1000.0));
}

std::optional<std::chrono::microseconds> parse_milliseconds(std::string_view text, Range range) {
  const auto ms = parse_number(text, range);
  if (!ms) return std::nullopt;
  return std::chrono::microseconds(whole_units_up(*ms, 1000.0));
}

std::optional<bool> parse_flag(std::string_view text) {
  if (text == "0") return false;
  if (text == "1") return true;
  return std::nullopt;
}

std::optional<size_t> parse_choice(std::string_view text,
                                   std::initializer_list<std::string_view> choices) {
  size_t index = 0;
  for (std::string_view choice : choices) {
    if (equals_ignoring_case(text, choice)) return index;
    ++index;
  }
  return std::nullopt;
}

std::optional<HostPort> parse_host_port(std::string_view text) {
  const auto colon = text.rfind(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == text.size()) {
    return std::nullopt;
  }
  std::string_view host = text.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  const auto port = parse_integer(text.substr(colon + 1), 65535);
  if (!port || *port == 0) return std::nullopt;
  return HostPort{std::string(host), static_cast<uint16_t>(*port)};
}

}  // namespace threelc::settings
