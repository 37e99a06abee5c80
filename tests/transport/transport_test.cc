// Multi-process tests of the transports: real transport_probe processes on 127.0.0.1 with the
// environment threelcrun would give them, plus hostile raw TCP clients. The TransportTest cases
// run once per transport (THREELC_TRANSPORT=tcp, and ucx when the build has it); UCX's own
// behaviour is tested in ucx_transport_test.cc.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "../../transport/src/frame.h"
#include "test_processes.h"
#include "threelc/transport/transport.h"
#include "transport_jobs.h"

namespace {

namespace ts = threelc::test_support;
using transport_jobs::Clock;
using transport_jobs::Env;
using transport_jobs::expect_all_ok;
using transport_jobs::expect_kill_named;
using transport_jobs::Job;

int connect_raw(uint16_t port, std::chrono::seconds limit) {
  const auto deadline = Clock::now() + limit;
  while (Clock::now() < deadline) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) return fd;
    ::close(fd);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return -1;
}

// True when the server closes `fd` within `limit` (reads drain whatever it sent).
bool closed_by_peer(int fd, std::chrono::milliseconds limit) {
  const auto deadline = Clock::now() + limit;
  char buffer[4096];
  while (Clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 50) > 0) {
      const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
      if (n <= 0) return true;
    }
  }
  return false;
}

std::vector<uint8_t> header_bytes(uint32_t magic, uint32_t tag, uint64_t length) {
  std::vector<uint8_t> out(16);
  for (int i = 0; i < 4; ++i) out[i] = static_cast<uint8_t>(magic >> (8 * i));
  for (int i = 0; i < 4; ++i) out[4 + i] = static_cast<uint8_t>(tag >> (8 * i));
  for (int i = 0; i < 8; ++i) out[8 + i] = static_cast<uint8_t>(length >> (8 * i));
  return out;
}

// One hostile client against `port`; returns whether it was dropped within `limit`.
bool attack(uint16_t port, const std::string& kind, std::chrono::milliseconds limit) {
  const int fd = connect_raw(port, std::chrono::seconds(10));
  if (fd < 0) return false;
  const uint32_t magic = threelc::transport::detail::kFrameMagic;
  std::vector<uint8_t> bytes;
  if (kind == "garbage") {
    bytes.assign(64, 0xAB);
  } else if (kind == "truncated") {
    bytes = header_bytes(magic, 1, 48);
    bytes.resize(9);
  } else if (kind == "oversized") {
    bytes = header_bytes(magic, 1, uint64_t{1} << 40);
  } else if (kind == "dribble") {
    bytes = header_bytes(magic, 1, 60);
  }
  bool dropped = false;
  if (kind == "dribble") {
    const auto deadline = Clock::now() + limit;
    for (size_t i = 0; Clock::now() < deadline; ++i) {
      const uint8_t byte = i < bytes.size() ? bytes[i] : 0;
      if (::send(fd, &byte, 1, MSG_NOSIGNAL) < 0) {
        dropped = true;
        break;
      }
      if (closed_by_peer(fd, std::chrono::milliseconds(400))) {
        dropped = true;
        break;
      }
    }
  } else {
    (void)::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    dropped = closed_by_peer(fd, limit);
  }
  ::close(fd);
  return dropped;
}

// The transports every TransportTest case runs over.
std::vector<std::string> transports() {
#ifdef THREELC_HAVE_UCX
  return {"tcp", "ucx"};
#else
  return {"tcp"};
#endif
}

class TransportTest : public ::testing::TestWithParam<std::string> {
 protected:
  const std::string& transport() const { return GetParam(); }
  bool ucx() const { return GetParam() == "ucx"; }
};

INSTANTIATE_TEST_SUITE_P(Transports, TransportTest, ::testing::ValuesIn(transports()),
                         [](const ::testing::TestParamInfo<std::string>& param) {
                           return param.param;
                         });

TEST_P(TransportTest, JobsOfOneToFiveRanksExchangeEverything) {
  for (int size = 1; size <= 5; ++size) {
    Job job(size, "ok" + std::to_string(size), transport());
    for (int rank = 0; rank < size; ++rank) job.spawn(rank);
    ASSERT_TRUE(job.wait_all(std::chrono::seconds(30)));
    expect_all_ok(job, size);
  }
}

TEST_P(TransportTest, WrongSecretIsRefusedAndNamed) {
  Job job(3, "secret", transport());
  const Env fast{{"THREELC_START_TIMEOUT", "3"}};
  job.spawn(0, fast);
  job.spawn(1, fast);
  Env bad = fast;
  bad["THREELC_SECRET"] = "not-the-secret";
  job.spawn(2, bad);
  ASSERT_TRUE(job.wait_all(std::chrono::seconds(20)));
  EXPECT_EQ(job.exit_code(2), 1);
  EXPECT_NE(job.output(2).find("THREELC_SECRET"), std::string::npos) << job.output(2);
  EXPECT_EQ(job.exit_code(0), 1);
  const std::string coordinator = job.output(0);
  EXPECT_NE(coordinator.find("authentication failed (claimed rank 2)"), std::string::npos)
      << coordinator;
  EXPECT_NE(coordinator.find("rank 2 of 3 never connected"), std::string::npos) << coordinator;
  EXPECT_EQ(job.exit_code(1), 1);
  EXPECT_NE(job.output(1).find("rank 2 of 3 never connected"), std::string::npos) << job.output(1);
}

TEST_P(TransportTest, ImpostorWithAWrongSecretIsDroppedAndTheJobRuns) {
  // A process claiming rank 2 with the wrong secret reaches the coordinator first: it is
  // refused and dropped, and the real rank 2, which comes after it, joins a job that runs.
  Job job(3, "impostor", transport());
  job.spawn(0);
  job.spawn(1);
  job.spawn_impostor(2, {{"THREELC_SECRET", "not-the-secret"}});
  job.wait_rank(Job::impostor(2), std::chrono::seconds(20));
  job.spawn(2);
  ASSERT_TRUE(job.wait_all(std::chrono::seconds(30)));
  expect_all_ok(job, 3);
  EXPECT_EQ(job.exit_code(Job::impostor(2)), 1) << job.output(Job::impostor(2));
  EXPECT_NE(job.output(Job::impostor(2)).find("THREELC_SECRET"), std::string::npos)
      << job.output(Job::impostor(2));
  EXPECT_NE(job.output(0).find("authentication failed (claimed rank 2)"), std::string::npos)
      << job.output(0);
}

TEST_P(TransportTest, RankThatNeverStartsIsNamed) {
  Job job(3, "absent", transport());
  const Env fast{{"THREELC_START_TIMEOUT", "3"}};
  const auto start = Clock::now();
  job.spawn(0, fast);
  job.spawn(1, fast);
  ASSERT_TRUE(job.wait_all(std::chrono::seconds(20)));
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(12));
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(job.exit_code(rank), 1);
    EXPECT_NE(job.output(rank).find("rank 2 of 3 never connected to the coordinator 127.0.0.1:" +
                                    std::to_string(job.port())),
              std::string::npos)
        << job.output(rank);
  }
}

TEST_P(TransportTest, HostileClientsAreDroppedWithoutDisturbingTheJob) {
  Job job(3, "hostile", transport());
  // Rank 2 starts late so that rank 1's data listener waits (and can be attacked) meanwhile.
  // Over UCX there is no data listener (the data goes over UCX): only the coordinator is.
  // Ranks linger 4 s after their checks so that the slow attackers meet the 2 s handshake
  // timeout (THREELC_TIMEOUT), not the process's exit.
  const Env env{{"THREELC_TIMEOUT", "2"},
                {"THREELC_TRANSPORT_DEBUG", "1"},
                {"THREELC_PROBE_LINGER_MS", "4000"}};
  job.spawn(0, env);
  job.spawn(1, env);
  // Rank 1 logs its data listener.
  uint16_t data_port = 0;
  for (auto deadline = Clock::now() + std::chrono::seconds(10);
       !ucx() && !data_port && Clock::now() < deadline;
       std::this_thread::sleep_for(std::chrono::milliseconds(20))) {
    const std::string log = job.output(1);
    const auto at = log.find("data listener on 127.0.0.1:");
    if (at != std::string::npos && log.find('\n', at) != std::string::npos) {
      data_port = static_cast<uint16_t>(std::stoi(log.substr(at + 27)));
    }
  }
  if (!ucx()) {
    ASSERT_NE(data_port, 0) << job.output(1);
  }
  std::vector<std::thread> attackers;
  std::map<std::string, bool> dropped;
  std::mutex mutex;
  const std::vector<std::string> targets = ucx() ? std::vector<std::string>{"coordinator"}
                                                 : std::vector<std::string>{"coordinator", "data"};
  for (const std::string& target : targets) {
    for (const std::string kind : {"garbage", "truncated", "oversized", "dribble"}) {
      attackers.emplace_back([&, target, kind] {
        const bool result = attack(target == "coordinator" ? job.port() : data_port, kind,
                                   std::chrono::milliseconds(3500));
        std::lock_guard lock(mutex);
        std::string key = target;
        key += '/';
        key += kind;
        dropped[key] = result;
      });
    }
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  job.spawn(2, env);
  for (auto& thread : attackers) thread.join();
  ASSERT_TRUE(job.wait_all(std::chrono::seconds(30)));
  expect_all_ok(job, 3);
  for (const auto& [name, result] : dropped) EXPECT_TRUE(result) << name << " was not dropped";
  EXPECT_NE(job.output(0).find("dropped connection from 127.0.0.1:"), std::string::npos)
      << job.output(0);
  if (!ucx()) {
    EXPECT_NE(job.output(1).find("dropped connection from 127.0.0.1:"), std::string::npos)
        << job.output(1);
  }
  for (int rank = 0; rank < (ucx() ? 1 : 2); ++rank) {
    const std::string log = job.output(rank);
    EXPECT_NE(log.find("handshake timed out after 2 s"), std::string::npos) << log;
    EXPECT_NE(log.find("bad frame magic"), std::string::npos) << log;
    EXPECT_NE(log.find("exceeds the limit of 1024 bytes"), std::string::npos) << log;
  }
}

TEST_P(TransportTest, PeerKilledMidTransferIsNamed) { expect_kill_named(transport(), "kill", {}); }

TEST_P(TransportTest, LongerMessageFailsOnlyItsReceiveNamingPeerTagAndSizes) {
  Job job(2, "truncate", transport());
  const Env env{{"THREELC_PROBE_MODE", "truncate"}};
  job.spawn(0, env);
  job.spawn(1, env);
  ASSERT_TRUE(job.wait_all(std::chrono::seconds(30)));
  expect_all_ok(job, 2);
  const auto lines = ts::lines_starting(job.output(0), "truncated: ");
  ASSERT_EQ(lines.size(), 2u) << job.output(0);
  // Arrived before its receive (staged / UCX's unexpected queue), then after (straight in).
  EXPECT_NE(lines[0].find("peer 1: threelc rank 0: message of 5000 bytes from rank 1 does not "
                          "fit the receive buffer of 1000 bytes (receive with tag 3 from rank 1)"),
            std::string::npos)
      << lines[0];
  EXPECT_NE(lines[1].find("message of 3145728 bytes from rank 1 does not fit the receive buffer "
                          "of 1000 bytes (receive with tag 4 from rank 1)"),
            std::string::npos)
      << lines[1];
}

TEST_P(TransportTest, TimeoutBlamesTheStalledRankNotTheRankWaitingForIt) {
  // Rank 2 stops (SIGSTOP); rank 1 starts waiting for it 2 s after rank 0 starts waiting for
  // rank 1, longer than a peer's answer may take (1 s at THREELC_TIMEOUT=4). Rank 0's wait
  // must learn that rank 1 waits for rank 2 and end with rank 1's stop notice naming rank 2.
  Job job(3, "chain", transport());
  const Env env{{"THREELC_PROBE_MODE", "chain"}, {"THREELC_TIMEOUT", "4"}};
  for (int rank = 0; rank < 3; ++rank) job.spawn(rank, env);
  job.wait_rank(1, std::chrono::seconds(30));
  job.wait_rank(0, std::chrono::seconds(10));
  job.kill_rank(2);
  for (int rank : {0, 1}) {
    const auto lines = ts::lines_starting(job.output(rank), "chain: ERROR after ");
    ASSERT_EQ(lines.size(), 1u) << job.output(rank);
    EXPECT_NE(lines[0].find("rank 2 did not answer"), std::string::npos) << lines[0];
    double took = 0;
    ASSERT_EQ(std::sscanf(lines[0].c_str(), "chain: ERROR after %lf s", &took), 1) << lines[0];
    if (rank == 1) {
      // Its own wait: it asks at 3 s and waits 1 s for the answer.
      EXPECT_NE(lines[0].find("timed out after 4"), std::string::npos) << lines[0];
    } else {
      // Rank 1's cause, relayed: not a timeout of its own naming rank 1.
      EXPECT_NE(lines[0].find("rank 1 stopped: "), std::string::npos) << lines[0];
      EXPECT_GE(took, 5.0) << lines[0];
    }
    EXPECT_LT(took, 12.0) << lines[0];
  }
}

TEST_P(TransportTest, RanksWaitingForEachOtherReportADeadlock) {
  // Each answers the other's question "I wait for you": one more timeout, then the error says
  // so rather than "did not answer" (at THREELC_TIMEOUT=4: asked at 3 s and again at 6 s).
  Job job(2, "deadlock", transport());
  const Env env{{"THREELC_PROBE_MODE", "deadlock"}, {"THREELC_TIMEOUT", "4"}};
  for (int rank = 0; rank < 2; ++rank) job.spawn(rank, env);
  ASSERT_TRUE(job.wait_all(std::chrono::seconds(30)));
  for (int rank = 0; rank < 2; ++rank) {
    const auto lines = ts::lines_starting(job.output(rank), "chain: ERROR after ");
    ASSERT_EQ(lines.size(), 1u) << job.output(rank);
    // The first to give up says deadlock; the other may report its stop notice instead.
    EXPECT_NE(lines[0].find("waits for this rank (a deadlock)"), std::string::npos) << lines[0];
    EXPECT_EQ(lines[0].find("did not answer"), std::string::npos) << lines[0];
  }
}

TEST_P(TransportTest, WaitingForAPeerDoesNotSpinACore) {
  // Rank 0 waits about 2 s for rank 1 with a receive and a 16 MiB send posted. A busy-spinning
  // progress loop would burn about as much CPU time as it waited; a sleeping one, next to none.
  Job job(2, "idle", transport());
  const Env env{{"THREELC_PROBE_MODE", "idle"}};
  job.spawn(0, env);
  job.spawn(1, env);
  ASSERT_TRUE(job.wait_all(std::chrono::seconds(30)));
  expect_all_ok(job, 2);
  const auto lines = ts::lines_starting(job.output(0), "idle: ");
  ASSERT_EQ(lines.size(), 1u) << job.output(0);
  double waited = 0, cpu = 0;
  ASSERT_EQ(std::sscanf(lines[0].c_str(), "idle: waited %lf s, cpu %lf s", &waited, &cpu), 2)
      << lines[0];
  EXPECT_GE(waited, 1.5) << lines[0];
  EXPECT_LT(cpu, 0.25 * waited) << lines[0];
}

}  // namespace
