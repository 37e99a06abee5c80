// Every environment variable the transport reads, declared once (settings.cc).
#pragma once

#include <span>
#include <string>

#include "threelc/settings/setting.h"

namespace threelc::transport::detail {

// The table, in the order docs list it.
std::span<const ::threelc::settings::Setting> settings();

// The row of one of the table's variables (a name missing from the table is a bug in the caller:
// it aborts).
const ::threelc::settings::Setting& setting(std::string_view name);

// The value of one of UCX's own UCX_* variables ("" when unset). UCX reads them itself; the UCX
// transport only looks so as not to override the user's choice.
std::string ucx_variable(const char* name);

}  // namespace threelc::transport::detail
