// Helpers for tests that start real rank processes on loopback: free ports, the environment
// threelcrun gives a rank, spawning a probe with its output in a log file, waiting with a
// deadline, and run_job(), which does all of it for a whole job of probes.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

extern char** environ;

namespace threelc::test_support {

using Clock = std::chrono::steady_clock;
// Environment entries, name -> value.
using Env = std::map<std::string, std::string>;

// A TCP port on 127.0.0.1 that was free a moment ago (bound, read back, released).
inline uint16_t free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

// The whole file ("" when it cannot be read).
inline std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The lines of `text` that start with `prefix`, in order.
inline std::vector<std::string> lines_starting(const std::string& text, const std::string& prefix) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(prefix, 0) == 0) out.push_back(line);
  }
  return out;
}

// The environment threelcrun gives rank `rank` of a job of `size` on 127.0.0.1 whose
// coordinator listens on `port`, with start and transfer timeouts of 20 s and 30 s.
inline Env rank_environment(int rank, int size, uint16_t port, const std::string& secret) {
  return {{"THREELC_RANK", std::to_string(rank)},
          {"THREELC_SIZE", std::to_string(size)},
          {"THREELC_LOCAL_RANK", std::to_string(rank)},
          {"THREELC_LOCAL_SIZE", std::to_string(size)},
          {"THREELC_COORDINATOR", "127.0.0.1:" + std::to_string(port)},
          {"THREELC_SECRET", secret},
          {"THREELC_START_TIMEOUT", "20"},
          {"THREELC_TIMEOUT", "30"}};
}

// A log path in the test temp dir, unique per test, per test process and per rank (ctest runs
// the cases of one test binary concurrently): <prefix>_<test>_<pid>_rank<rank>.log.
inline std::string log_path(const std::string& prefix, int rank) {
  std::string test = ::testing::UnitTest::GetInstance()->current_test_info()->name();
  std::replace(test.begin(), test.end(), '/', '_');  // parameterized names hold a '/'
  return ::testing::TempDir() + prefix + "_" + test + "_" + std::to_string(::getpid()) + "_rank" +
         std::to_string(rank) + ".log";
}

// Starts `path` with this process's environment less anything a launcher set (THREELC_*,
// OMPI_*, SLURM_*, RANK) plus `vars`, stdout and stderr going to `log`. THREELC_TRANSPORT is
// the exception: it is kept unless `vars` sets it, so that ctest's <test>_ucx variants
// (THREELC_TRANSPORT=ucx in the test's environment) run their jobs over UCX. Returns its pid
// (-1, and a test failure, when it cannot be started).
inline pid_t spawn_logged(const std::string& path, const Env& vars, const std::string& log) {
  std::vector<std::string> strings;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    const bool transport = entry.rfind("THREELC_TRANSPORT=", 0) == 0;
    if (transport ? vars.count("THREELC_TRANSPORT") != 0
                  : entry.rfind("THREELC_", 0) == 0 || entry.rfind("OMPI_", 0) == 0 ||
                        entry.rfind("SLURM_", 0) == 0 || entry.rfind("RANK=", 0) == 0) {
      continue;
    }
    strings.push_back(entry);
  }
  for (const auto& [name, value] : vars) {
    std::string entry = name;
    entry += '=';
    entry += value;
    strings.push_back(std::move(entry));
  }
  std::vector<char*> envp;
  envp.reserve(strings.size() + 1);
  for (auto& s : strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  std::string program = path;
  char* argv[] = {program.data(), nullptr};
  pid_t pid = -1;
  const int error = posix_spawn(&pid, program.c_str(), &actions, nullptr, argv, envp.data());
  EXPECT_EQ(error, 0) << "cannot start " << path;
  posix_spawn_file_actions_destroy(&actions);
  return error == 0 ? pid : -1;
}

// Waits for `pid` until `deadline`; past it kills and reaps the process. Returns its wait
// status, or -1 when it had to be killed (or never started).
inline int wait_until(pid_t pid, Clock::time_point deadline) {
  if (pid <= 0) return -1;
  while (true) {
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) return status;
    if (Clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// The exit code in a wait status (-1 for a status of -1 or a process killed by a signal).
inline int exit_code(int status) {
  return status >= 0 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

struct JobOptions {
  std::string probe;                   // the executable every rank runs
  int ranks = 1;                       // THREELC_SIZE
  std::chrono::seconds limit{60};      // for the whole job; stragglers are killed
  std::string secret = "test-secret";  // THREELC_SECRET
  std::string log_prefix = "job";      // see log_path()
  Env env;  // extra entries (e.g. THREELC_PROBE_MODE); they override rank_environment()'s
};

struct RankProcess {
  pid_t pid = -1;
  std::string log;  // stdout + stderr
  int status = -1;  // wait status; -1 when the rank hung and was killed
};

// Starts options.ranks probes on 127.0.0.1 with the environment threelcrun would give them and
// waits up to options.limit for all of them, killing stragglers (a test failure that shows the
// straggler's log). Returns, per rank, its pid, log path and wait status.
inline std::vector<RankProcess> run_job(const JobOptions& options) {
  const uint16_t port = free_port();
  std::vector<RankProcess> ranks(static_cast<size_t>(options.ranks));
  for (int rank = 0; rank < options.ranks; ++rank) {
    Env vars = rank_environment(rank, options.ranks, port, options.secret);
    for (const auto& [name, value] : options.env) vars[name] = value;
    auto& p = ranks[static_cast<size_t>(rank)];
    p.log = log_path(options.log_prefix, rank);
    p.pid = spawn_logged(options.probe, vars, p.log);
  }
  const auto deadline = Clock::now() + options.limit;
  for (size_t rank = 0; rank < ranks.size(); ++rank) {
    auto& p = ranks[rank];
    p.status = wait_until(p.pid, deadline);
    if (p.status == -1 && p.pid > 0) {
      ADD_FAILURE() << "rank " << rank << " hung:\n" << read_file(p.log);
    }
  }
  return ranks;
}

// Every rank exited 0 (a test failure with its log for each that did not).
inline bool expect_all_exit_zero(const std::vector<RankProcess>& ranks) {
  bool ok = true;
  for (size_t rank = 0; rank < ranks.size(); ++rank) {
    if (exit_code(ranks[rank].status) != 0) {
      ADD_FAILURE() << "rank " << rank << ":\n" << read_file(ranks[rank].log);
      ok = false;
    }
  }
  return ok;
}

// Every rank exited 0 and printed the same "HASH " lines as rank 0 (bitwise-identical results).
// Returns rank 0's "HASH " lines ({} when a rank failed).
inline std::vector<std::string> expect_same_hashes(const std::vector<RankProcess>& ranks) {
  if (ranks.empty() || !expect_all_exit_zero(ranks)) return {};
  auto reference = lines_starting(read_file(ranks[0].log), "HASH ");
  for (size_t rank = 1; rank < ranks.size(); ++rank) {
    EXPECT_EQ(lines_starting(read_file(ranks[rank].log), "HASH "), reference)
        << "rank " << rank << " differs from rank 0";
  }
  return reference;
}

// Every rank exited 0 and rank 0 printed exactly one "ERROR " line, which holds `text` (the
// probes' malformed-message modes). Prints that line.
inline void expect_one_error_on_rank0(const std::vector<RankProcess>& ranks,
                                      const std::string& text) {
  expect_all_exit_zero(ranks);
  ASSERT_FALSE(ranks.empty());
  const std::string log = read_file(ranks[0].log);
  const auto errors = lines_starting(log, "ERROR ");
  ASSERT_EQ(errors.size(), 1u) << log;
  EXPECT_NE(errors[0].find(text), std::string::npos) << errors[0];
  std::printf("%s\n", errors[0].c_str());
}

}  // namespace threelc::test_support
