// Multi-process tests of the TCP transport: real transport_probe processes on 127.0.0.1 with
// the environment threelcrun would give them, plus hostile raw TCP clients.
#include <arpa/inet.h>
#include <gtest/gtest.h>
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

// A job of transport_probe ranks whose ranks the test starts one by one, each with its own
// environment overrides.
class Job {
 public:
  Job(int size, const std::string& name) : size_(size), port_(ts::free_port()), name_(name) {}

  Env env(int rank) const {
    Env vars = ts::rank_environment(rank, size_, port_, "s3cret-" + name_);
    vars["THREELC_TIMEOUT"] = "10";
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

TEST(TransportTest, JobsOfOneToFiveRanksExchangeEverything) {
  for (int size = 1; size <= 5; ++size) {
    Job job(size, "ok" + std::to_string(size));
    for (int rank = 0; rank < size; ++rank) job.spawn(rank);
    ASSERT_TRUE(job.wait_all(std::chrono::seconds(30)));
    expect_all_ok(job, size);
  }
}

TEST(TransportTest, WrongSecretIsRefusedAndNamed) {
  Job job(3, "secret");
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

TEST(TransportTest, RankThatNeverStartsIsNamed) {
  Job job(3, "absent");
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

TEST(TransportTest, HostileClientsAreDroppedWithoutDisturbingTheJob) {
  Job job(3, "hostile");
  // Rank 2 starts late so that rank 1's data listener waits (and can be attacked) meanwhile.
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
       !data_port && Clock::now() < deadline;
       std::this_thread::sleep_for(std::chrono::milliseconds(20))) {
    const std::string log = job.output(1);
    const auto at = log.find("data listener on 127.0.0.1:");
    if (at != std::string::npos && log.find('\n', at) != std::string::npos) {
      data_port = static_cast<uint16_t>(std::stoi(log.substr(at + 27)));
    }
  }
  ASSERT_NE(data_port, 0) << job.output(1);
  std::vector<std::thread> attackers;
  std::map<std::string, bool> dropped;
  std::mutex mutex;
  for (const std::string target : {"coordinator", "data"}) {
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
  EXPECT_NE(job.output(1).find("dropped connection from 127.0.0.1:"), std::string::npos)
      << job.output(1);
  for (int rank = 0; rank < 2; ++rank) {
    const std::string log = job.output(rank);
    EXPECT_NE(log.find("handshake timed out after 2 s"), std::string::npos) << log;
    EXPECT_NE(log.find("bad frame magic"), std::string::npos) << log;
    EXPECT_NE(log.find("exceeds the limit of 1024 bytes"), std::string::npos) << log;
  }
}

TEST(TransportTest, PeerKilledMidTransferIsNamed) {
  Job job(2, "kill");
  const Env env{{"THREELC_PROBE_MODE", "kill"}, {"THREELC_TIMEOUT", "5"}};
  job.spawn(0, env);
  job.spawn(1, env);
  const auto start = Clock::now();
  ASSERT_TRUE(job.wait_all(std::chrono::seconds(20)));
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(12));
  EXPECT_EQ(job.exit_code(0), 1) << job.output(0);
  EXPECT_NE(job.output(0).find("rank 1"), std::string::npos) << job.output(0);
}

}  // namespace
