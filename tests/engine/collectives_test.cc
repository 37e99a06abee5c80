// The collectives besides push_pull across real processes: jobs of 1..5 collectives_probe ranks
// on 127.0.0.1 with the environment threelcrun would give them. Each probe checks its own
// outputs against references it computes (see collectives_probe.cc); this test checks that every
// rank exits 0 and printed the same output hashes (bitwise-identical results), and that a short
// or garbage message is a CollectiveError naming the peer.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
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
std::vector<Rank> run_job(int size, std::chrono::seconds limit, const std::string& mode) {
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
          std::string("THREELC_SECRET=collectives-test"), std::string("THREELC_START_TIMEOUT=20"),
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
    p.log += "collectives_" + test;
    p.log += "_" + std::to_string(::getpid()) + "_rank" + r + ".log";
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, p.log.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                     0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    std::string path = COLLECTIVES_PROBE_PATH;
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

class CollectivesJob : public ::testing::TestWithParam<int> {};

TEST_P(CollectivesJob, EveryCollectiveMatchesItsReferenceIdenticallyOnEveryRank) {
  const int size = GetParam();
  const auto ranks = run_job(size, std::chrono::seconds(100), "check");
  std::vector<std::string> reference;
  for (int rank = 0; rank < size; ++rank) {
    const auto& p = ranks[static_cast<size_t>(rank)];
    const std::string log = read_file(p.log);
    ASSERT_TRUE(WIFEXITED(p.status) && WEXITSTATUS(p.status) == 0) << "rank " << rank << ":\n"
                                                                   << log;
    const auto hashes = lines_starting(log, "HASH ");
    if (rank == 0) {
      reference = hashes;
      // allreduce_raw: 8 types x 5 ops x 5 layouts + 3 large; ring: 2 modes x (3 x 10 + 2)
      // iterations; broadcast: 3 sizes from every root; allgatherv: 3 layouts.
      EXPECT_EQ(hashes.size(), static_cast<size_t>(8 * 5 * 5 + 3 + 2 * 32 + 3 * size + 3)) << log;
      for (const auto& stat : lines_starting(log, "STAT ")) std::printf("%s\n", stat.c_str());
      for (const auto& events : lines_starting(log, "EVENTS ")) std::printf("%s\n", events.c_str());
    } else {
      EXPECT_EQ(hashes, reference) << "rank " << rank << " differs from rank 0";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, CollectivesJob, ::testing::Values(1, 2, 3, 4, 5),
                         [](const auto& p) { return std::to_string(p.param) + "ranks"; });

// Rank 1 sends rank 0 one bad message instead of taking part; rank 0 must name it.
void expect_error_naming_rank1(const std::string& mode, const std::string& text) {
  const auto ranks = run_job(2, std::chrono::seconds(60), mode);
  for (int rank = 0; rank < 2; ++rank) {
    const auto& p = ranks[static_cast<size_t>(rank)];
    EXPECT_TRUE(WIFEXITED(p.status) && WEXITSTATUS(p.status) == 0) << "rank " << rank << ":\n"
                                                                   << read_file(p.log);
  }
  const auto errors = lines_starting(read_file(ranks[0].log), "ERROR ");
  ASSERT_EQ(errors.size(), 1u) << read_file(ranks[0].log);
  EXPECT_NE(errors[0].find(text), std::string::npos) << errors[0];
  std::printf("%s\n", errors[0].c_str());
}

TEST(Collectives, ShortRawChunkIsAnErrorNamingThePeer) {
  expect_error_naming_rank1("short_raw",
                            "message from rank 1 (tag 4096) has 10 bytes, expected 2000");
}

TEST(Collectives, GarbageRingBlockIsAnErrorNamingThePeer) {
  expect_error_naming_rank1("garbage_ring", "malformed reduce-scatter block from rank 1");
}

}  // namespace
