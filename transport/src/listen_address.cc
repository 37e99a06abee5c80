// Resolves THREELC_IFACE (an address or an interface name, via getifaddrs) to a listen address.
#include <utility>  // before any Asio header (Boost 1.74 with C++20)

#include <boost/asio/ip/address.hpp>
// clang-format off
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
// clang-format on

#include "listen_address.h"

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

}  // namespace threelc::transport::detail
