// Every environment variable the transport reads, declared once (settings.cc).
#pragma once

#include <span>
#include <string>

namespace threelc::transport::detail {

struct Setting {
  const char* name;
  const char* default_value;  // as text; "" = unset
  const char* meaning;
};

// The table, in the order docs list it.
std::span<const Setting> settings();

// The value of one of UCX's own UCX_* variables ("" when unset). UCX reads them itself; the UCX
// transport only looks so as not to override the user's choice.
std::string ucx_variable(const char* name);

}  // namespace threelc::transport::detail
