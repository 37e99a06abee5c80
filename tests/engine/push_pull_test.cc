// push_pull_sum across real processes: jobs of 1..5 push_pull_probe ranks on 127.0.0.1 with the
// environment threelcrun would give them. Each probe checks its own results against the exact
// sums (see push_pull_probe.cc); this test checks that every rank exits 0 and that every rank
// printed the same output hashes (bitwise-identical results).
//
// The spawning code is a minimal copy of tests/transport/transport_test.cc's Job (that file
// was out of this change's scope to refactor).
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
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>
#include "test_processes.h"

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;

using threelc::test_support::free_port;
using threelc::test_support::read_file;

struct Rank {
  pid_t pid = -1;
  std::string log;
  int status = -1;
};

// Starts `size` probes, waits up to `limit` for all of them (killing stragglers).
std::vector<Rank> run_job(int size, std::chrono::seconds limit, const std::string& mode = "check") {
  const uint16_t port = free_port();
  std::vector<Rank> ranks(static_cast<size_t>(size));
  for (int rank = 0; rank < size; ++rank) {
    std::vector<std::string> strings;
    for (char** e = environ; *e != nullptr; ++e) {
      const std::string entry = *e;
      if (entry.rfind("THREELC_", 0) != 0) strings.push_back(entry);
    }
    const std::string n = std::to_string(size);
    const std::string r = std::to_string(rank);
    for (const std::string& entry :
         {"THREELC_RANK=" + r, "THREELC_SIZE=" + n, "THREELC_LOCAL_RANK=" + r,
          "THREELC_LOCAL_SIZE=" + n, "THREELC_COORDINATOR=127.0.0.1:" + std::to_string(port),
          std::string("THREELC_SECRET=push-pull-test"), std::string("THREELC_START_TIMEOUT=20"),
          std::string("THREELC_TIMEOUT=30"), "THREELC_PROBE_MODE=" + mode}) {
      strings.push_back(entry);
    }
    std::vector<char*> envp;
    envp.reserve(strings.size() + 1);
    for (auto& s : strings) envp.push_back(s.data());
    envp.push_back(nullptr);
    auto& p = ranks[static_cast<size_t>(rank)];
    // Unique per test and per test process: ctest runs the cases of this file concurrently.
    std::string test = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::replace(test.begin(), test.end(), '/', '_');  // parameterized names hold a '/'
    p.log = ::testing::TempDir();
    p.log += "push_pull_" + test;
    p.log += "_" + std::to_string(::getpid()) + "_rank" + r + ".log";
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, p.log.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                     0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    std::string path = PUSH_PULL_PROBE_PATH;
    char* argv[] = {path.data(), nullptr};
    EXPECT_EQ(posix_spawn(&p.pid, path.c_str(), &actions, nullptr, argv, envp.data()), 0);
    posix_spawn_file_actions_destroy(&actions);
  }
  const auto deadline = Clock::now() + limit;
  for (auto& p : ranks) {
    while (true) {
      int status = 0;
      if (::waitpid(p.pid, &status, WNOHANG) == p.pid) {
        p.status = status;
        break;
      }
      if (Clock::now() > deadline) {
        ::kill(p.pid, SIGKILL);
        ::waitpid(p.pid, &status, 0);
        ADD_FAILURE() << "rank hung:\n" << read_file(p.log);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  return ranks;
}

std::vector<std::string> lines_starting(const std::string& text, const std::string& prefix) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(prefix, 0) == 0) out.push_back(line);
  }
  return out;
}

class PushPullJob : public ::testing::TestWithParam<int> {};

TEST_P(PushPullJob, SumsExactlyOrWithinTheBoundAndIdenticallyOnEveryRank) {
  const int size = GetParam();
  const auto ranks = run_job(size, std::chrono::seconds(90));
  std::vector<std::string> reference;
  for (int rank = 0; rank < size; ++rank) {
    const auto& p = ranks[static_cast<size_t>(rank)];
    const std::string log = read_file(p.log);
    ASSERT_TRUE(WIFEXITED(p.status) && WEXITSTATUS(p.status) == 0) << "rank " << rank << ":\n"
                                                                   << log;
    const auto hashes = lines_starting(log, "HASH ");
    if (rank == 0) {
      reference = hashes;
      // 6 layouts x 2 modes; 20 iterations each except 3 for the large one.
      EXPECT_EQ(hashes.size(), size_t{5 * 2 * 20 + 2 * 3}) << log;
      for (const auto& stat : lines_starting(log, "STAT ")) std::printf("%s\n", stat.c_str());
    } else {
      EXPECT_EQ(hashes, reference) << "rank " << rank << " differs from rank 0";
    }
  }
}

TEST(PushPull, MalformedBlockIsAnErrorNamingThePeer) {
  const auto ranks = run_job(2, std::chrono::seconds(60), "malformed");
  for (int rank = 0; rank < 2; ++rank) {
    const auto& p = ranks[static_cast<size_t>(rank)];
    EXPECT_TRUE(WIFEXITED(p.status) && WEXITSTATUS(p.status) == 0) << "rank " << rank << ":\n"
                                                                   << read_file(p.log);
  }
  const auto errors = lines_starting(read_file(ranks[0].log), "ERROR ");
  ASSERT_EQ(errors.size(), 1u) << read_file(ranks[0].log);
  EXPECT_NE(errors[0].find("malformed push block from rank 1"), std::string::npos) << errors[0];
  std::printf("%s\n", errors[0].c_str());
}

INSTANTIATE_TEST_SUITE_P(Ranks, PushPullJob, ::testing::Values(1, 2, 3, 4, 5),
                         [](const auto& p) { return std::to_string(p.param) + "ranks"; });

}  // namespace
