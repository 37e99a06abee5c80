// In-process tests: the environment table (options_from_environment) and the frame parser.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <optional>
#include <string>
#include <vector>

#include "../../transport/src/frame.h"
#include "../../transport/src/host_address.h"
#include "../../transport/src/listen_address.h"
#include "../../transport/src/slurm_tasks.h"
#include "threelc/transport/transport.h"

namespace {

namespace tt = threelc::transport;

class EnvironmentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : {"THREELC_RANK",
                             "THREELC_SIZE",
                             "THREELC_LOCAL_RANK",
                             "THREELC_LOCAL_SIZE",
                             "THREELC_COORDINATOR",
                             "THREELC_SECRET",
                             "THREELC_IFACE",
                             "THREELC_TRANSPORT",
                             "THREELC_START_TIMEOUT",
                             "THREELC_TIMEOUT",
                             "OMPI_COMM_WORLD_RANK",
                             "OMPI_COMM_WORLD_SIZE",
                             "SLURM_PROCID",
                             "SLURM_NTASKS",
                             "SLURM_STEP_NUM_TASKS",
                             "SLURM_LOCALID",
                             "SLURM_NODEID",
                             "SLURM_STEP_ID",
                             "SLURM_STEP_TASKS_PER_NODE",
                             "SLURM_TASKS_PER_NODE",
                             "SLURM_NTASKS_PER_NODE",
                             "PMIX_NAMESPACE",
                             "PMIX_RANK",
                             "PMI_FD",
                             "PMI_RANK",
                             "RANK",
                             "WORLD_SIZE",
                             "LOCAL_RANK",
                             "LOCAL_WORLD_SIZE",
                             "MASTER_ADDR",
                             "MASTER_PORT"}) {
      unsetenv(name);
    }
  }
};

std::string error_of(void (*f)()) {
  try {
    f();
  } catch (const tt::Error& e) {
    return e.what();
  }
  return "";
}

TEST_F(EnvironmentTest, DefaultsToASingleRank) {
  const auto options = tt::options_from_environment();
  EXPECT_EQ(options.rank, 0);
  EXPECT_EQ(options.size, 1);
  EXPECT_EQ(options.timeout.count(), 30'000);
}

// A default-constructed Options holds the rows' defaults: what nothing set reads as.
TEST(OptionsTest, DefaultsAreTheRows) {
  const tt::Options defaults;
  const auto read =
      tt::options_from([](std::string_view) -> std::optional<std::string> { return std::nullopt; });
  for (const tt::Options* options : {&defaults, &read}) {
    EXPECT_EQ(options->rank, 0);
    EXPECT_EQ(options->size, 1);
    EXPECT_EQ(options->local_rank, 0);
    EXPECT_EQ(options->local_size, 1);
    EXPECT_EQ(options->transport, "tcp");
    EXPECT_EQ(options->start_timeout.count(), 60'000);
    EXPECT_EQ(options->timeout.count(), 30'000);
    EXPECT_EQ(options->max_message_bytes, size_t{1} << 31);
    EXPECT_FALSE(options->debug);
    EXPECT_EQ(options->secret, "");
    EXPECT_EQ(options->wireup, "");
  }
}

// The seconds parser every layer shares rounds up to whole milliseconds.
TEST(OptionsTest, TimeoutsRoundUpToTheMillisecond) {
  const auto with = [](const char* seconds) {
    return tt::options_from([seconds](std::string_view name) -> std::optional<std::string> {
      if (name == "THREELC_TIMEOUT") return seconds;
      return std::nullopt;
    });
  };
  EXPECT_EQ(with("0.0001").timeout.count(), 1);
  EXPECT_EQ(with("1.1").timeout.count(), 1100);
  EXPECT_EQ(with("1e7").timeout.count(), 10'000'000'000);
  EXPECT_THROW(with("0"), tt::Error);
  EXPECT_THROW(with("1.5e7"), tt::Error);
}

TEST_F(EnvironmentTest, ReadsThreelcVariables) {
  setenv("THREELC_RANK", "2", 1);
  setenv("THREELC_SIZE", "4", 1);
  setenv("THREELC_COORDINATOR", "10.0.0.1:29500", 1);
  setenv("THREELC_TIMEOUT", "0.25", 1);
  const auto options = tt::options_from_environment();
  EXPECT_EQ(options.rank, 2);
  EXPECT_EQ(options.size, 4);
  EXPECT_EQ(options.coordinator_host, "10.0.0.1");
  EXPECT_EQ(options.coordinator_port, 29500);
  EXPECT_EQ(options.timeout.count(), 250);
}

TEST_F(EnvironmentTest, TorchrunCoordinatorIsMasterPortPlusOne) {
  setenv("RANK", "1", 1);
  setenv("WORLD_SIZE", "2", 1);
  setenv("LOCAL_WORLD_SIZE", "2", 1);
  setenv("MASTER_ADDR", "node7", 1);
  setenv("MASTER_PORT", "29400", 1);
  const auto options = tt::options_from_environment();
  EXPECT_EQ(options.rank, 1);
  EXPECT_EQ(options.local_size, 2);
  EXPECT_EQ(options.coordinator_host, "node7");
  EXPECT_EQ(options.coordinator_port, 29401);
}

TEST_F(EnvironmentTest, SlurmAndMpirun) {
  setenv("SLURM_PROCID", "3", 1);
  setenv("SLURM_NTASKS", "8", 1);
  setenv("SLURM_NTASKS_PER_NODE", "4(x2)", 1);
  setenv("THREELC_COORDINATOR", "h:1", 1);
  auto options = tt::options_from_environment();
  EXPECT_EQ(options.rank, 3);
  EXPECT_EQ(options.size, 8);
  EXPECT_EQ(options.local_size, 4);
  EXPECT_EQ(options.wireup, "");
  setenv("OMPI_COMM_WORLD_RANK", "5", 1);
  setenv("OMPI_COMM_WORLD_SIZE", "6", 1);
  options = tt::options_from_environment();
  EXPECT_EQ(options.rank, 5);
  EXPECT_EQ(options.size, 6);
}

TEST(SlurmTasksTest, ExpandsRunsAtTheNode) {
  using threelc::transport::detail::slurm_tasks_on_node;
  EXPECT_EQ(slurm_tasks_on_node("4", 0), 4);
  EXPECT_EQ(slurm_tasks_on_node("4", 1), std::nullopt);  // one node only
  for (long long node = 0; node < 3; ++node) EXPECT_EQ(slurm_tasks_on_node("2(x3),1", node), 2);
  EXPECT_EQ(slurm_tasks_on_node("2(x3),1", 3), 1);
  EXPECT_EQ(slurm_tasks_on_node("2(x3),1", 4), std::nullopt);
  EXPECT_EQ(slurm_tasks_on_node("1(x2),3(x1),5", 2), 3);
  EXPECT_EQ(slurm_tasks_on_node("1(x2),3(x1),5", 3), 5);
  for (const char* malformed :
       {"", "2(x", "(x3)", "0", "2(x0)", "2(y3)", "2,", ",2", "2(x3)x", "-1", "2 ,1", "1,x"}) {
    EXPECT_EQ(slurm_tasks_on_node(malformed, 0), std::nullopt) << malformed;
  }
}

TEST(HostAddress, ReachableAddressIsThisHostsAndNotLoopback) {
  namespace td = threelc::transport::detail;
  EXPECT_EQ(td::host_port_text("10.0.0.1", 29500), "10.0.0.1:29500");
  EXPECT_EQ(td::host_port_text("fe80::1", 7), "[fe80::1]:7");
  const std::string address = td::reachable_host_address();
  EXPECT_NE(address.rfind("127.", 0), 0u) << address;
  EXPECT_NE(address, "::1");
  EXPECT_FALSE(td::resolve_interface_name(address).empty()) << address;  // an interface holds it
}

TEST_F(EnvironmentTest, SlurmSizeAndLocalSizeOfTheStep) {
  setenv("SLURM_PROCID", "5", 1);
  setenv("SLURM_NTASKS", "16", 1);  // the allocation's; the step has 7
  setenv("SLURM_STEP_NUM_TASKS", "7", 1);
  setenv("SLURM_NODEID", "3", 1);
  setenv("SLURM_TASKS_PER_NODE", "4(x4)", 1);
  setenv("SLURM_STEP_TASKS_PER_NODE", "2(x3),1", 1);
  setenv("SLURM_NTASKS_PER_NODE", "4", 1);
  setenv("THREELC_COORDINATOR", "h:1", 1);
  auto options = tt::options_from_environment();
  EXPECT_EQ(options.size, 7);
  EXPECT_EQ(options.local_size, 1);
  unsetenv("SLURM_STEP_TASKS_PER_NODE");
  EXPECT_EQ(tt::options_from_environment().local_size, 4);
  setenv("SLURM_TASKS_PER_NODE", "2(x3),1", 1);
  setenv("SLURM_NODEID", "4", 1);
  const std::string error = error_of([] { tt::options_from_environment(); });
  EXPECT_NE(error.find("SLURM_TASKS_PER_NODE='2(x3),1' is not Slurm's tasks-per-node list"),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("SLURM_NODEID=4"), std::string::npos) << error;
}

TEST_F(EnvironmentTest, WithoutACoordinatorTheLauncherServiceIsUsed) {
  setenv("OMPI_COMM_WORLD_RANK", "1", 1);
  setenv("OMPI_COMM_WORLD_SIZE", "4", 1);
  std::string error = error_of([] { tt::options_from_environment(); });
  EXPECT_NE(error.find("no way to meet"), std::string::npos) << error;
  EXPECT_NE(error.find("-x THREELC_COORDINATOR -x THREELC_SECRET"), std::string::npos) << error;
  setenv("PMI_FD", "7", 1);
  setenv("PMI_RANK", "1", 1);
  EXPECT_EQ(tt::options_from_environment().wireup, "pmi2");
  setenv("PMIX_NAMESPACE", "slurm.pmix.12.0", 1);
  setenv("PMIX_RANK", "1", 1);
  EXPECT_EQ(tt::options_from_environment().wireup, "pmix");  // PMIx first
  setenv("THREELC_SECRET", "s", 1);
  error = error_of([] { tt::options_from_environment(); });
  EXPECT_NE(error.find("THREELC_SECRET is set but THREELC_COORDINATOR is not"), std::string::npos)
      << error;
  setenv("THREELC_COORDINATOR", "h:1", 1);
  EXPECT_EQ(tt::options_from_environment().wireup, "");  // a coordinator the user set wins
  unsetenv("OMPI_COMM_WORLD_RANK");
  unsetenv("OMPI_COMM_WORLD_SIZE");
  unsetenv("THREELC_COORDINATOR");
  unsetenv("THREELC_SECRET");
  unsetenv("PMIX_NAMESPACE");
  unsetenv("PMI_FD");
  setenv("SLURM_PROCID", "0", 1);
  setenv("SLURM_NTASKS", "2", 1);
  error = error_of([] { tt::options_from_environment(); });  // sbatch's script itself
  EXPECT_NE(error.find("Slurm's batch script itself"), std::string::npos) << error;
  setenv("SLURM_STEP_ID", "0", 1);
  error = error_of([] { tt::options_from_environment(); });
  EXPECT_NE(error.find("'srun --mpi=pmix'"), std::string::npos) << error;
  EXPECT_NE(error.find("THREELC_COORDINATOR=<rank 0's host>"), std::string::npos) << error;
  setenv("SLURM_NTASKS", "1", 1);  // one rank meets nobody
  EXPECT_EQ(tt::options_from_environment().wireup, "");
}

TEST_F(EnvironmentTest, ErrorsNameTheVariable) {
  setenv("THREELC_RANK", "x", 1);
  EXPECT_NE(error_of([] { tt::options_from_environment(); }).find("THREELC_RANK='x'"),
            std::string::npos);
  setenv("THREELC_RANK", "1", 1);
  setenv("THREELC_SIZE", "2", 1);
  EXPECT_NE(error_of([] { tt::options_from_environment(); }).find("THREELC_COORDINATOR"),
            std::string::npos);
  setenv("THREELC_COORDINATOR", "nohost", 1);
  EXPECT_NE(error_of([] { tt::options_from_environment(); }).find("THREELC_COORDINATOR='nohost'"),
            std::string::npos);
  setenv("THREELC_COORDINATOR", "h:2", 1);
  setenv("THREELC_TIMEOUT", "-1", 1);
  EXPECT_NE(error_of([] { tt::options_from_environment(); }).find("THREELC_TIMEOUT='-1'"),
            std::string::npos);
  setenv("THREELC_TIMEOUT", "2", 1);
  setenv("THREELC_TRANSPORT", "pigeon", 1);
  EXPECT_NE(error_of([] {
              tt::options_from_environment();
            }).find("THREELC_TRANSPORT='pigeon' is not accepted: expected tcp or ucx"),
            std::string::npos);
  setenv("THREELC_TRANSPORT", "ucx", 1);
  EXPECT_EQ(tt::options_from_environment().transport, "ucx");
}

TEST(ConnectTest, RefusesEmptySecretAndUnknownTransports) {
  tt::Options options;
  options.size = 2;
  EXPECT_THROW(tt::connect(options), tt::Error);
  options.secret = "x";
  options.transport = "verbs";
  try {
    tt::connect(options);
    FAIL();
  } catch (const tt::Error& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "THREELC_TRANSPORT='verbs' is not accepted: expected tcp or ucx"),
              std::string::npos)
        << e.what();
  }
#ifndef THREELC_HAVE_UCX
  // A build without UCX says so, and why, rather than trying.
  options.transport = "ucx";
  try {
    tt::connect(options);
    FAIL();
  } catch (const tt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("this build of threelc has no UCX transport: UCX "
                                         "(libucx-dev) was not found when it was configured"),
              std::string::npos)
        << e.what();
  }
#endif
}

TEST(FrameTest, RoundTripAndLimits) {
  namespace d = tt::detail;
  const auto bytes = d::encode_frame_header(77, 1234);
  d::FrameHeader header;
  EXPECT_EQ(d::parse_frame_header(bytes, 1234, header), "");
  EXPECT_EQ(header.tag, 77u);
  EXPECT_EQ(header.length, 1234u);
  EXPECT_NE(d::parse_frame_header(bytes, 1233, header).find("exceeds"), std::string::npos);
  auto bad = bytes;
  bad[0] = std::byte{0};
  EXPECT_NE(d::parse_frame_header(bad, 1 << 20, header).find("magic"), std::string::npos);
  EXPECT_NE(d::parse_frame_header(std::span(bytes).first(5), 1 << 20, header), "");
}

}  // namespace
