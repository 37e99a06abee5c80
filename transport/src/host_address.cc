#include "host_address.h"

// clang-format off
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <unistd.h>
// clang-format on

#include <algorithm>
#include <array>
#include <string_view>
#include <vector>

#include "threelc/transport/transport.h"

namespace threelc::transport::detail {

namespace {

// The text of an IPv4 or IPv6 address that is neither loopback nor (v6) link-local, else "".
std::string usable_address_text(const sockaddr* address) {
  char text[INET6_ADDRSTRLEN] = {};
  if (address->sa_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(address);
    if ((ntohl(in->sin_addr.s_addr) >> 24) == 127) return "";
    return inet_ntop(AF_INET, &in->sin_addr, text, sizeof text) != nullptr ? text : "";
  }
  if (address->sa_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(address);
    if (IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr) || IN6_IS_ADDR_LINKLOCAL(&in6->sin6_addr) ||
        IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
      return "";
    }
    return inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof text) != nullptr ? text : "";
  }
  return "";
}

// The first IPv4 and the first IPv6 address offered; best() prefers IPv4.
struct FirstOfEach {
  std::string v4, v6;
  void offer(const std::string& text) {
    std::string& slot = text.find(':') == std::string::npos ? v4 : v6;
    if (slot.empty()) slot = text;
  }
  std::string best() const { return v4.empty() ? v6 : v4; }
};

bool is_bridge(std::string_view name) {
  for (std::string_view prefix : {"docker", "br-", "virbr", "veth"}) {
    if (name.substr(0, prefix.size()) == prefix) return true;
  }
  return false;
}

// The usable addresses of the interfaces that are up and neither loopback nor bridges, in the
// order getifaddrs lists them.
std::vector<std::string> interface_addresses() {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) throw Error(-1, "threelc: getifaddrs failed");
  std::vector<std::string> addresses;
  for (ifaddrs* it = list; it != nullptr; it = it->ifa_next) {
    if (it->ifa_addr == nullptr || (it->ifa_flags & IFF_UP) == 0 ||
        (it->ifa_flags & IFF_LOOPBACK) != 0 || is_bridge(it->ifa_name)) {
      continue;
    }
    if (std::string text = usable_address_text(it->ifa_addr); !text.empty()) {
      addresses.push_back(std::move(text));
    }
  }
  freeifaddrs(list);
  return addresses;
}

// Of the addresses this host's name resolves to, the first that one of `held` is.
std::string address_of_host_name(const std::vector<std::string>& held) {
  std::array<char, 256> name{};
  if (gethostname(name.data(), name.size() - 1) != 0) return "";
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(name.data(), nullptr, &hints, &found) != 0) return "";
  FirstOfEach first;
  for (const addrinfo* it = found; it != nullptr; it = it->ai_next) {
    const std::string text = usable_address_text(it->ai_addr);
    if (!text.empty() && std::find(held.begin(), held.end(), text) != held.end()) {
      first.offer(text);
    }
  }
  freeaddrinfo(found);
  return first.best();
}

}  // namespace

std::string reachable_host_address() {
  const std::vector<std::string> held = interface_addresses();
  if (std::string address = address_of_host_name(held); !address.empty()) return address;
  FirstOfEach first;
  for (const std::string& address : held) first.offer(address);
  if (!first.best().empty()) return first.best();
  throw Error(-1,
              "threelc: this host has no address other hosts can reach rank 0's coordinator by "
              "(no interface is up but loopback or bridges): set THREELC_IFACE to the interface "
              "or address the ranks reach it by");
}

std::string host_port_text(const std::string& host, uint16_t port) {
  const bool v6 = host.find(':') != std::string::npos;
  std::string text = v6 ? "[" : "";  // appended piece by piece (GCC 12's false -Wrestrict)
  text += host;
  text += v6 ? "]:" : ":";
  text += std::to_string(port);
  return text;
}

}  // namespace threelc::transport::detail
