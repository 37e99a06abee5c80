// Jobs of transport_probe processes on 127.0.0.1 for the transport tests (transport_test.cc,
// ucx_transport_test.cc): each rank started with the environment threelcrun would give it plus
// the test's overrides, its output logged, waited for with a limit, killed at the end.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "test_processes.h"

namespace transport_jobs {

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

inline void expect_all_ok(Job& job, int size) {
  for (int rank = 0; rank < size; ++rank) {
    EXPECT_EQ(job.exit_code(rank), 0) << "rank " << rank << ":\n" << job.output(rank);
  }
}

// Kills rank 1 of a 2-rank job mid-stream (probe mode "kill") with `env` added; checks that
// rank 0's receive fails naming rank 1 within THREELC_TIMEOUT (5 s) and returns its output.
inline std::string expect_kill_named(const std::string& transport, const std::string& name,
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

}  // namespace transport_jobs
