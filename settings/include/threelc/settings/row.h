// A row of a layer's table: the documentation `Setting` and the parse that writes the value into
// the layer's target struct (EngineSettings, transport::Options, the codec's Isa). Every layer
// reads its rows one way, read_rows(): the value through the lookup, else the row's default,
// parsed by the row; the first that fails gives the refusal text, which the layer puts in its
// own error model (the engine throws std::invalid_argument, the transport transport::Error, the
// codec returns a Status). The defaults are written once, in the rows: a target struct's default
// constructor reads the rows with no_variables().
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "threelc/settings/setting.h"

namespace threelc::settings {

// --- vocabulary ------------------------------------------------------------------------------

// One variable: its documentation and how its text becomes part of `Target`. `parse` is one of
// settings/'s parsers with the row's bounds, assigning the result; false when it refuses the
// text. nullptr: the layer reads the variable itself (only whether it is set, or its text in a
// step of its own) and the row only documents it.
template <typename Target>
struct Row {
  Setting doc;
  bool (*parse)(std::string_view text, Target& into) = nullptr;
};

// A lookup under which nothing is set: every row reads its default.
inline std::optional<std::string> no_variables(std::string_view) { return std::nullopt; }

// `field = *parsed` when the parser accepted the text; the one line of a row's parse.
template <typename Field, typename Parsed>
bool assign(Field& field, const std::optional<Parsed>& parsed) {
  if (!parsed) return false;
  field = static_cast<Field>(*parsed);
  return true;
}

// The text of a row's variable, unchanged (a text row's parse).
inline bool assign_text(std::string& field, std::string_view text) {
  field = std::string(text);
  return true;
}

// --- reading ---------------------------------------------------------------------------------

// Reads one row into `into`: nullopt when it was accepted, else the refusal text
// ("NAME='value' is not accepted: expected ...").
template <typename Target>
std::optional<std::string> read_row(const Row<Target>& row, const EnvironmentLookup& lookup,
                                    Target& into) {
  const std::string text = value_or_default(row.doc, lookup);
  if (row.parse == nullptr || row.parse(text, into)) return std::nullopt;
  return refusal(row.doc, text);
}

// Reads every row in order; the refusal text of the first that fails, nullopt when all passed.
template <typename Target>
std::optional<std::string> read_rows(std::span<const Row<Target>> rows,
                                     const EnvironmentLookup& lookup, Target& into) {
  for (const Row<Target>& row : rows) {
    if (auto refused = read_row(row, lookup, into)) return refused;
  }
  return std::nullopt;
}

// --- the table at compile time ---------------------------------------------------------------

// The documentation rows of a table, for the docs and the C ABI.
template <typename Target, size_t N>
constexpr std::array<Setting, N> documentation(const std::array<Row<Target>, N>& rows) {
  std::array<Setting, N> docs{};
  for (size_t i = 0; i < N; ++i) docs[i] = rows[i].doc;
  return docs;
}

// Several tables as one, in order (a layer that reads its parts in steps of their own).
template <typename Target, size_t... N>
constexpr std::array<Row<Target>, (N + ...)> join(const std::array<Row<Target>, N>&... parts) {
  std::array<Row<Target>, (N + ...)> rows{};
  size_t i = 0;
  ((std::copy(parts.begin(), parts.end(), rows.begin() + i), i += N), ...);
  return rows;
}

// The index of the row named `name`. consteval: a name the table lacks is not a constant
// expression, so a mistyped name fails to compile.
template <typename Rows>
consteval size_t index_of(const Rows& rows, std::string_view name) {
  for (size_t i = 0; i < rows.size(); ++i) {
    if (std::string_view(rows[i].doc.name) == name) return i;
  }
  throw "no row of this name in the table";
}

}  // namespace threelc::settings
