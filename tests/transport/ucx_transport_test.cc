// Multi-process tests of UCX's own behaviour under the UCX transport: which of its transports
// carry the data (UCX_TLS, THREELC_IFACE against UCX_NET_DEVICES) and how their failures read.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "transport_jobs.h"

namespace {

using transport_jobs::Clock;
using transport_jobs::Env;
using transport_jobs::expect_all_ok;
using transport_jobs::expect_kill_named;
using transport_jobs::Job;
namespace ts = threelc::test_support;

#ifdef THREELC_HAVE_UCX

// UCX's own behaviour: which of its transports carry the data, and how their failures read.
class UcxTransportTest : public ::testing::TestWithParam<std::string> {
 protected:
  // UCX_TLS for the job: "" leaves UCX's default (shared memory between local ranks).
  Env tls() const { return GetParam().empty() ? Env{} : Env{{"UCX_TLS", GetParam()}}; }
  std::string label() const { return GetParam().empty() ? "default" : GetParam(); }
};

INSTANTIATE_TEST_SUITE_P(Tls, UcxTransportTest, ::testing::Values("", "tcp"),
                         [](const ::testing::TestParamInfo<std::string>& param) {
                           return param.param.empty() ? std::string("shm") : param.param;
                         });

TEST_P(UcxTransportTest, JobRunsOverTheSelectedTransports) {
  Job job(3, "tls_" + label(), "ucx");
  Env env = tls();
  env["THREELC_TRANSPORT_DEBUG"] = "1";
  for (int rank = 0; rank < 3; ++rank) job.spawn(rank, env);
  ASSERT_TRUE(job.wait_all(std::chrono::seconds(30)));
  expect_all_ok(job, 3);
  for (int rank = 0; rank < 3; ++rank) {
    // THREELC_TRANSPORT_DEBUG prints each endpoint's lanes (ucp_ep_print_info).
    const std::string log = job.output(rank);
    EXPECT_NE(log.find("UCX data channels to 2 ranks"), std::string::npos) << log;
    if (GetParam().empty()) {
      // Shared memory, although every endpoint asks for peer-failure handling.
      EXPECT_TRUE(log.find("sysv/") != std::string::npos || log.find("posix/") != std::string::npos)
          << log;
      EXPECT_EQ(log.find("tcp/"), std::string::npos) << log;
    } else {
      EXPECT_NE(log.find("tcp/"), std::string::npos) << log;
      EXPECT_EQ(log.find("sysv/"), std::string::npos) << log;
    }
  }
}

TEST_P(UcxTransportTest, PeerKilledMidTransferIsNamed) {
  const std::string log = expect_kill_named("ucx", "ucx_kill_" + label(), tls());
  // UCX finds it before THREELC_TIMEOUT (5 s) does: its keepalive (1 s rounds) on shared
  // memory, the socket over tcp.
  EXPECT_NE(log.find("ERROR (peer 1): threelc rank 0: connection to rank 1 failed: UCX reports"),
            std::string::npos)
      << log;
}

TEST(UcxUnreachableTest, PeerWithNoTransportInCommonIsNamed) {
  // No UCX transport in common: rank 0 has only tcp, rank 1 only shared memory.
  Job job(2, "unreachable", "ucx");
  job.spawn(0, {{"UCX_TLS", "tcp"}});
  job.spawn(1, {{"UCX_TLS", "sm"}});
  ASSERT_TRUE(job.wait_all(std::chrono::seconds(30)));
  for (int rank = 0; rank < 2; ++rank) {
    const int peer = 1 - rank;
    EXPECT_EQ(job.exit_code(rank), 1) << job.output(rank);
    EXPECT_NE(job.output(rank).find("ERROR (peer " + std::to_string(peer) + "): threelc rank " +
                                    std::to_string(rank) + ": cannot reach rank " +
                                    std::to_string(peer) + " over UCX"),
              std::string::npos)
        << job.output(rank);
  }
}

// The lanes of a 2-rank UCX job over UCX_TLS=tcp with `env` added, as the debug log prints them
// ("tcp/lo.0"): the rank-0 log, after checking that both ranks succeeded.
std::string tcp_lanes_of_job(const std::string& name, Env env) {
  Job job(2, name, "ucx");
  env["UCX_TLS"] = "tcp";
  env["THREELC_TRANSPORT_DEBUG"] = "1";
  for (int rank = 0; rank < 2; ++rank) job.spawn(rank, env);
  EXPECT_TRUE(job.wait_all(std::chrono::seconds(30)));
  expect_all_ok(job, 2);
  return job.output(0);
}

// An up interface with an IPv4 address other than loopback (eth0), and that address; empty
// when the host has none.
struct Interface {
  std::string name;
  std::string address;
};
Interface other_interface() {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return {};
  Interface found;
  for (ifaddrs* it = list; it != nullptr && found.name.empty(); it = it->ifa_next) {
    if (it->ifa_addr != nullptr && it->ifa_addr->sa_family == AF_INET &&
        std::string(it->ifa_name) != "lo" && (it->ifa_flags & IFF_UP) != 0) {
      char text[INET_ADDRSTRLEN];
      const auto* in = reinterpret_cast<const sockaddr_in*>(it->ifa_addr);
      if (inet_ntop(AF_INET, &in->sin_addr, text, sizeof text) == nullptr) continue;
      found = {it->ifa_name, text};
    }
  }
  freeifaddrs(list);
  return found;
}

TEST(UcxNetDevicesTest, ThreelcIfaceSteersUcxNetworkTraffic) {
  // Left alone, UCX puts ranks of one host on loopback; THREELC_IFACE moves them, whether it
  // names the interface or its address.
  const Interface other = other_interface();
  if (other.name.empty()) GTEST_SKIP() << "this host has no interface besides lo";
  for (const std::string& iface : {other.name, other.address}) {
    const std::string log = tcp_lanes_of_job("iface", {{"THREELC_IFACE", iface}});
    EXPECT_NE(log.find("tcp/" + other.name + "."), std::string::npos) << iface << ":\n" << log;
    EXPECT_EQ(log.find("tcp/lo."), std::string::npos) << iface << ":\n" << log;
  }
}

TEST(UcxNetDevicesTest, UsersUcxNetDevicesWinsOverThreelcIface) {
  const Interface other = other_interface();
  if (other.name.empty()) GTEST_SKIP() << "this host has no interface besides lo";
  const std::string log =
      tcp_lanes_of_job("iface_user", {{"THREELC_IFACE", other.name}, {"UCX_NET_DEVICES", "lo"}});
  EXPECT_NE(log.find("tcp/lo."), std::string::npos) << log;
  EXPECT_EQ(log.find("tcp/" + other.name + "."), std::string::npos) << log;
}

#endif  // THREELC_HAVE_UCX

}  // namespace
