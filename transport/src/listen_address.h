// THREELC_IFACE as an address or an interface name: which address a rank's data listener binds
// (TCP), or which interface carries UCX's network traffic.
#pragma once

#include <string>

#include "threelc/transport/transport.h"

namespace threelc::transport::detail {

// options.listen_host if it is an address; the IPv4 address of the interface of that name; or
// `fallback` when it is empty. Throws Error when the name matches neither.
std::string resolve_listen_host(const Options& options, const std::string& fallback);

// The name of the interface THREELC_IFACE means: the name itself when an interface has it, or
// the interface that holds the address. Throws Error when neither.
std::string resolve_interface_name(const std::string& iface_or_address);

}  // namespace threelc::transport::detail
