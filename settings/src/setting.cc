// Setting rows: their type names, the environment lookup and the refusal text.
#include <cstdlib>

#include "threelc/settings/setting.h"

namespace threelc::settings {

const char* type_name(Type type) {
  switch (type) {
    case Type::kFlag:
      return "flag";
    case Type::kInteger:
      return "integer";
    case Type::kBytes:
      return "bytes";
    case Type::kNumber:
      return "number";
    case Type::kSeconds:
      return "seconds";
    case Type::kMilliseconds:
      return "milliseconds";
    case Type::kChoice:
      return "choice";
    case Type::kText:
      return "text";
    case Type::kHostPort:
      return "host:port";
  }
  return "?";
}

std::optional<std::string> process_environment(std::string_view name) {
  const char* value = std::getenv(std::string(name).c_str());
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
}

std::string value_or_default(const Setting& setting, const EnvironmentLookup& lookup) {
  std::optional<std::string> value = lookup(setting.name);
  if (value && !value->empty()) return *value;
  return setting.default_value;
}

std::string refusal(const Setting& setting, std::string_view value) {
  return std::string(setting.name) + "='" + std::string(value) + "' is not accepted: expected " +
         setting.accepted;
}

const Setting* find(std::span<const Setting> rows, std::string_view name) {
  for (const Setting& row : rows) {
    if (name == row.name) return &row;
  }
  return nullptr;
}

}  // namespace threelc::settings
