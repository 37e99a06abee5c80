// Every environment variable the transport reads, declared once (settings.cc).
#pragma once

#include <span>

namespace threelc::transport::detail {

struct Setting {
  const char* name;
  const char* default_value;  // as text; "" = unset
  const char* meaning;
};

// The table, in the order docs list it.
std::span<const Setting> settings();

}  // namespace threelc::transport::detail
