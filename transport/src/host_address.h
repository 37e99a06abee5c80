// The address this host is reached by, for rank 0's coordinator when nothing names one, and
// THREELC_COORDINATOR's host:port text.
#pragma once

#include <cstdint>
#include <string>

namespace threelc::transport::detail {

// Of the addresses of the interfaces that are up and neither loopback nor a container or VM
// bridge (docker*, br-*, virbr*, veth*: NCCL leaves those out too), the first that this host's
// name resolves to (getaddrinfo(gethostname())), else the first; IPv4 before global IPv6.
// Throws Error (set THREELC_IFACE) when there is none.
std::string reachable_host_address();

// host:port, or [host]:port when host is an IPv6 address.
std::string host_port_text(const std::string& host, uint16_t port);

}  // namespace threelc::transport::detail
