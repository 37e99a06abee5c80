// The shape of one environment variable's declaration, shared by every layer. Each layer keeps
// one table of rows (row.h: a `Setting` and its parse; compression/src/settings.cc,
// transport/src/settings_rows.h, engine/src/settings_rows.cc) next to the code that reads the
// values; the documentation tables in README.md and docs/CONFIGURATION.md are generated from the
// same rows (threelc-settings-doc) and a test checks them. A malformed value is refused with
// refusal()'s text, which names the variable, the value and what is accepted; each layer throws or
// returns it in its own error model.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>

namespace threelc::settings {

// What kind of value a variable takes (the docs' "type" column).
enum class Type : uint8_t {
  kFlag,     // 0 or 1
  kInteger,  // decimal digits
  kBytes,    // decimal digits, optionally K, M or G (KiB, MiB, GiB)
  kNumber,   // a finite decimal number
  kSeconds,  // a number of seconds, fractions allowed
  kMilliseconds,
  kChoice,    // one of a few words
  kText,      // free text: a path, a name, a secret
  kHostPort,  // host:port or [v6-address]:port
};

// The docs' name of a type: "flag", "integer", "bytes", ...
const char* type_name(Type type);

// The one declaration of an environment variable.
struct Setting {
  const char* name;  // "THREELC_CHUNK_BYTES"
  Type type;
  const char* default_value;  // as a user would write it; "" = unset / off
  const char* accepted;       // the values accepted, as error messages and docs say it
  const char* meaning;        // one line of Markdown: README.md's table
  const char* details = "";   // the whole story for docs/CONFIGURATION.md; "": the meaning
};

// A layer's table and the heading its rows go under in the docs.
struct SettingTable {
  const char* layer;  // "engine", "transport", "compression"
  std::span<const Setting> rows;
};

// The value of a variable; nullopt when it is not set. An empty value counts as unset.
using EnvironmentLookup = std::function<std::optional<std::string>(std::string_view name)>;

// getenv(), with an empty value as unset.
std::optional<std::string> process_environment(std::string_view name);

// The variable's text through `lookup`: its value when set and non-empty, else its default.
std::string value_or_default(const Setting& setting, const EnvironmentLookup& lookup);

// "THREELC_CHUNK_BYTES='4098' is not accepted: expected <setting.accepted>" (callers put their
// "threelc: " or "threelc rank 3: " before it).
std::string refusal(const Setting& setting, std::string_view value);

// The row named `name` in `rows`; nullptr when there is none (a run-time search, for the C ABI
// and tests; a layer names its own rows at compile time: row.h's index_of()).
const Setting* find(std::span<const Setting> rows, std::string_view name);

// --- the parsers: nullopt for anything malformed or out of range ------------------------------

// Decimal digits only (no sign, suffix or spaces), at most `max` (and at least `min`).
std::optional<uint64_t> parse_integer(std::string_view text, uint64_t max);
std::optional<uint64_t> parse_integer(std::string_view text, uint64_t min, uint64_t max);

// Decimal digits, optionally followed by one suffix K, M or G (any case) for KiB, MiB, GiB; at
// most `max`.
std::optional<uint64_t> parse_bytes(std::string_view text, uint64_t max);

// The bounds of a number a row accepts: [low, high], either end open when said.
struct Range {
  double low = 0;
  double high = 0;
  bool low_open = false;   // (low, ...
  bool high_open = false;  // ..., high)
  bool contains(double value) const;
};

// A finite decimal number ("0.5", "2", "1e-3"); no sign, no spaces, no hex; within `range`.
std::optional<double> parse_number(std::string_view text);
std::optional<double> parse_number(std::string_view text, Range range);

// A number of seconds in `range` (fractions allowed), rounded up to whole milliseconds: a
// positive value never becomes 0 (which means "disabled" or "no wait" to its readers).
std::optional<std::chrono::milliseconds> parse_seconds(std::string_view text, Range range);

// A number of milliseconds in `range` (fractions allowed), rounded up to whole microseconds.
std::optional<std::chrono::microseconds> parse_milliseconds(std::string_view text, Range range);

// "0" or "1".
std::optional<bool> parse_flag(std::string_view text);

// The index of `text` among `choices`, compared ignoring case.
std::optional<size_t> parse_choice(std::string_view text,
                                   std::initializer_list<std::string_view> choices);

// The value paired with `text`'s choice, compared ignoring case: parse_choice() for a row
// whose words stand for values ({{"push_pull", kPushPull}, {"ring", kRing}}).
template <typename T>
std::optional<T> parse_choice_value(std::string_view text,
                                    std::initializer_list<std::pair<std::string_view, T>> choices) {
  for (const auto& [word, value] : choices) {
    if (parse_choice(text, {word})) return value;
  }
  return std::nullopt;
}

// host:port or [v6-address]:port, the port in [1, 65535].
struct HostPort {
  std::string host;
  uint16_t port = 0;
};
std::optional<HostPort> parse_host_port(std::string_view text);

}  // namespace threelc::settings
