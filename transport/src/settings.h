// Every environment variable the transport reads, declared once (settings_rows.h) and read by
// options_from() (settings.cc).
#pragma once

#include <string>

#include "settings_rows.h"

namespace threelc::transport::detail {

// The value of one of UCX's own UCX_* variables ("" when unset). UCX reads them itself; the UCX
// transport only looks so as not to override the user's choice.
std::string ucx_variable(const char* name);

}  // namespace threelc::transport::detail
