// Resolves THREELC_IFACE (an address or an interface name, via getifaddrs) to a listen address
// or to an interface name.
#include <utility>  // before any Asio header (Boost 1.74 with C++20)

#include <boost/asio/ip/address.hpp>
// clang-format off
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
// clang-format on

#include "listen_address.h"

#include <cstring>

namespace threelc::transport::detail {

std::string resolve_listen_host(const Options& options, const std::string& fallback) {
  if (options.listen_host.empty()) return fallback;
  boost::system::error_code ec;
  boost::asio::ip::make_address(options.listen_host, ec);
  if (!ec) return options.listen_host;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) throw Error(-1, "threelc: getifaddrs failed");
  std::string found;
  for (ifaddrs* it = list; it != nullptr; it = it->ifa_next) {
    if (it->ifa_addr == nullptr || options.listen_host != it->ifa_name) continue;
    if (it->ifa_addr->sa_family == AF_INET) {
      char text[INET_ADDRSTRLEN];
      const auto* in = reinterpret_cast<const sockaddr_in*>(it->ifa_addr);
      if (inet_ntop(AF_INET, &in->sin_addr, text, sizeof text) != nullptr) {
        found = text;
        break;
      }
    }
  }
  freeifaddrs(list);
  if (found.empty()) {
    throw Error(-1, "threelc: THREELC_IFACE='" + options.listen_host +
                        "' is neither an address nor an interface with an IPv4 address");
  }
  return found;
}

std::string resolve_interface_name(const std::string& iface_or_address) {
  boost::system::error_code ec;
  const auto wanted = boost::asio::ip::make_address(iface_or_address, ec);
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) throw Error(-1, "threelc: getifaddrs failed");
  std::string found;
  for (ifaddrs* it = list; it != nullptr && found.empty(); it = it->ifa_next) {
    if (ec) {  // a name
      if (iface_or_address == it->ifa_name) found = it->ifa_name;
      continue;
    }
    if (it->ifa_addr == nullptr) continue;
    if (it->ifa_addr->sa_family == AF_INET && wanted.is_v4()) {
      const auto* in = reinterpret_cast<const sockaddr_in*>(it->ifa_addr);
      if (ntohl(in->sin_addr.s_addr) == wanted.to_v4().to_uint()) found = it->ifa_name;
    } else if (it->ifa_addr->sa_family == AF_INET6 && wanted.is_v6()) {
      const auto* in6 = reinterpret_cast<const sockaddr_in6*>(it->ifa_addr);
      const auto bytes = wanted.to_v6().to_bytes();
      if (std::memcmp(in6->sin6_addr.s6_addr, bytes.data(), bytes.size()) == 0) {
        found = it->ifa_name;
      }
    }
  }
  freeifaddrs(list);
  if (found.empty()) {
    throw Error(-1, "threelc: THREELC_IFACE='" + iface_or_address + "' is " +
                        (ec ? "not the name of an interface on this host"
                            : "an address no interface on this host holds"));
  }
  return found;
}

}  // namespace threelc::transport::detail
