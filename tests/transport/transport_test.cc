// Multi-process tests of the transports: real transport_probe processes on 127.0.0.1 with the
// environment threelcrun would give them, plus hostile raw TCP clients. The TransportTest cases
// run once per transport (THREELC_TRANSPORT=tcp, and ucx when the build has it); the
// UcxTransportTest cases are about UCX's own behaviour (its transports, unreachable peers).
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

namespace {

namespace ts = threelc::test_support;
using ts::Clock;
using ts::Env;

struct Process {
  pid_t pid = -1;
  std::string log;  // stdout + stderr
  int status = -1;
  bool exited = false;
};

// A job of transport_probe ranks over `transport` whose ranks the test starts one by one, each
// with its own environment overrides.
class Job {
 public:
  Job(int size, const std::string& name, const std::string& transport)
      : size_(size), port_(ts::free_port()), name_(name), transport_(transport) {}

  Env env(int rank) const {
    Env vars = ts::rank_environment(rank, size_, port_, "s3cret-" + name_);
    vars["THREELC_TIMEOUT"] = "10";
    vars["THREELC_TRANSPORT"] = transport_;
    return vars;
  }

  Process& spawn(int rank, const Env& overrides = {}) {
    Env vars = env(rank);
    for (const auto& [k, v] : overrides) vars[k] = v;
    auto& process = processes_[rank];
    process.log = ts::log_path("transport_" + name_, rank);
    process.pid = ts::spawn_logged(TRANSPORT_PROBE_PATH, vars, process.log);
    return process;
  }

  // A process that claims `rank` with `overrides` (e.g. a wrong secret), kept apart from the
  // job's ranks: exit_code(), output() and wait_rank() know it as impostor(rank).
  static int impostor(int rank) { return 1000 + rank; }
  Process& spawn_impostor(int rank, const Env& overrides) {
    Env vars = env(rank);
    for (const auto& [k, v] : overrides) vars[k] = v;
    auto& process = processes_[impostor(rank)];
    process.log = ts::log_path("transport_" + name_ + "_impostor", rank);
    process.pid = ts::spawn_logged(TRANSPORT_PROBE_PATH, vars, process.log);
    return process;
  }

  // Waits for every spawned process up to `limit`; kills the rest. Returns false on a hang.
  bool wait_all(std::chrono::seconds limit) {
    const auto deadline = Clock::now() + limit;
    bool hung = false;
    for (auto& [rank, process] : processes_) {
      if (process.exited) continue;
      process.status = ts::wait_until(process.pid, deadline);
      process.exited = true;
      if (process.status == -1) {
        hung = true;
        ADD_FAILURE() << "rank " << rank << " hung:\n" << ts::read_file(process.log);
      }
    }
    return !hung;
  }

  // Waits for one rank (reaping it: a dead rank left a zombie still looks alive to UCX's
  // keepalive on shared memory, which checks that the peer's process exists).
  void wait_rank(int rank, std::chrono::seconds limit) {
    auto& process = processes_.at(rank);
    if (process.exited) return;
    process.status = ts::wait_until(process.pid, Clock::now() + limit);
    process.exited = true;
    if (process.status == -1) ADD_FAILURE() << "rank " << rank << " hung:\n" << output(rank);
  }

  void kill_rank(int rank) {
    auto& process = processes_.at(rank);
    if (process.exited) return;
    ::kill(process.pid, SIGKILL);
    process.status = ts::wait_until(process.pid, Clock::now() + std::chrono::seconds(10));
    process.exited = true;
  }

  int exit_code(int rank) { return ts::exit_code(processes_.at(rank).status); }
  std::string output(int rank) { return ts::read_file(processes_.at(rank).log); }
  uint16_t port() const { return port_; }

  ~Job() {
    for (auto& [rank, process] : processes_) {
      if (!process.exited && process.pid > 0) {
        ::kill(process.pid, SIGKILL);
        ::waitpid(process.pid, nullptr, 0);
      }
    }
  }

 private:
  int size_;
  uint16_t port_;
  std::string name_;
  std::string transport_;
  std::map<int, Process> processes_;
};

void expect_all_ok(Job& job, int size) {
  for (int rank = 0; rank < size; ++rank) {
    EXPECT_EQ(job.exit_code(rank), 0) << "rank " << rank << ":\n" << job.output(rank);
  }
}

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

// Kills rank 1 of a 2-rank job mid-stream (probe mode "kill") with `env` added; checks that
// rank 0's receive fails naming rank 1 within THREELC_TIMEOUT (5 s) and returns its output.
std::string expect_kill_named(const std::string& transport, const std::string& name,
                              const Env& extra) {
  Job job(2, name, transport);
  Env env{{"THREELC_PROBE_MODE", "kill"}, {"THREELC_TIMEOUT", "5"}};
  for (const auto& [k, v] : extra) env[k] = v;
  job.spawn(0, env);
  job.spawn(1, env);
  const auto start = Clock::now();
  job.wait_rank(1, std::chrono::seconds(10));
  EXPECT_TRUE(job.wait_all(std::chrono::seconds(20)));
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(12));
  EXPECT_EQ(job.exit_code(0), 1) << job.output(0);
  EXPECT_NE(job.output(0).find("ERROR (peer 1)"), std::string::npos) << job.output(0);
  EXPECT_NE(job.output(0).find("rank 1"), std::string::npos) << job.output(0);
  return job.output(0);
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
