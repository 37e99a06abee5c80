// Which address a rank's data listener binds: THREELC_IFACE as an address or an interface name.
#pragma once

#include <string>

#include "threelc/transport/transport.h"

namespace threelc::transport::detail {

// options.listen_host if it is an address; the IPv4 address of the interface of that name; or
// `fallback` when it is empty. Throws Error when the name matches neither.
std::string resolve_listen_host(const Options& options, const std::string& fallback);

}  // namespace threelc::transport::detail
