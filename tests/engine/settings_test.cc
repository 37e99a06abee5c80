// The engine's settings table (engine/src/settings_rows.cc), the docs that list it, and the logger.
#include "settings.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>

#include "observe/log.h"
#include "threelc/transport/transport.h"

namespace {

namespace te = threelc::engine;
using std::chrono::microseconds;
using std::chrono::milliseconds;

te::EngineSettings parse(const std::map<std::string, std::string>& variables) {
  return te::engine_settings_from([&](std::string_view name) -> std::optional<std::string> {
    const auto found = variables.find(std::string(name));
    if (found == variables.end()) return std::nullopt;
    return found->second;
  });
}

std::string error_of(const std::string& name, const std::string& value) {
  try {
    parse({{name, value}});
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

std::string read_source_file(const std::string& relative) {
  std::ifstream in(std::string(THREELC_SOURCE_DIR) + "/" + relative);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(EngineSettings, DefaultsMatchTheStructAndTheTable) {
  const te::EngineSettings defaults;
  const auto parsed = parse({});
  EXPECT_EQ(parsed.cycle_time, defaults.cycle_time);
  EXPECT_EQ(parsed.cycle_time, microseconds(1000));
  EXPECT_EQ(parsed.fusion_threshold, defaults.fusion_threshold);
  EXPECT_EQ(parsed.fusion_threshold, size_t{67108864});
  EXPECT_EQ(parsed.chunk_bytes, defaults.chunk_bytes);
  EXPECT_EQ(parsed.chunk_bytes, size_t{1048576});
  EXPECT_EQ(parsed.compression, defaults.compression);
  EXPECT_TRUE(parsed.compression);
  EXPECT_EQ(parsed.sparsity, defaults.sparsity);
  EXPECT_EQ(parsed.sparsity, 1.0f);
  EXPECT_EQ(parsed.min_compress_bytes, defaults.min_compress_bytes);
  EXPECT_EQ(parsed.min_compress_bytes, size_t{1024});
  EXPECT_EQ(parsed.scale_tile, defaults.scale_tile);
  EXPECT_EQ(parsed.scale_tile, size_t{320});
  EXPECT_EQ(parsed.allreduce, defaults.allreduce);
  EXPECT_EQ(parsed.allreduce, te::AllreduceAlgorithm::kPushPull);
  EXPECT_EQ(parsed.timeline, defaults.timeline);
  EXPECT_EQ(parsed.timeline, "");
  EXPECT_EQ(parsed.stats, defaults.stats);
  EXPECT_FALSE(parsed.stats);
  EXPECT_EQ(parsed.stall_check_time, defaults.stall_check_time);
  EXPECT_EQ(parsed.stall_check_time, milliseconds(60'000));
  EXPECT_EQ(parsed.stall_timeout, defaults.stall_timeout);
  EXPECT_EQ(parsed.stall_timeout, milliseconds(600'000));
  EXPECT_EQ(parsed.deadlock_timeout, defaults.deadlock_timeout);
  EXPECT_EQ(parsed.deadlock_timeout, milliseconds(30'000));
  EXPECT_EQ(parsed.feedback_limit, defaults.feedback_limit);
  EXPECT_EQ(parsed.feedback_limit, 100.0);
  EXPECT_EQ(parsed.log_level, defaults.log_level);
  EXPECT_EQ(parsed.log_level, te::LogLevel::kWarning);
  EXPECT_EQ(parsed.cache_capacity, defaults.cache_capacity);
  EXPECT_EQ(parsed.cache_capacity, size_t{1024});
}

TEST(EngineSettings, ParsesEveryVariable) {
  const auto s = parse({{"THREELC_CYCLE_TIME_MS", "0.3"},
                        {"THREELC_FUSION_THRESHOLD", "32M"},
                        {"THREELC_CHUNK_BYTES", "4k"},
                        {"THREELC_COMPRESSION", "None"},
                        {"THREELC_SPARSITY", "1.5"},
                        {"THREELC_SCALE_TILE", "1280"},
                        {"THREELC_MIN_COMPRESS_BYTES", "0"},
                        {"THREELC_ALLREDUCE", "ring"},
                        {"THREELC_TIMELINE", "/tmp/some timeline.json"},
                        {"THREELC_STATS", "1"},
                        {"THREELC_STALL_CHECK_TIME", "2.5"},
                        {"THREELC_STALL_TIMEOUT", "0.75"},
                        {"THREELC_DEADLOCK_TIMEOUT", "3"},
                        {"THREELC_FEEDBACK_LIMIT", "12.5"},
                        {"THREELC_LOG_LEVEL", "DEBUG"},
                        {"THREELC_CACHE_CAPACITY", "0"}});
  EXPECT_EQ(s.cycle_time, microseconds(300));
  EXPECT_EQ(s.fusion_threshold, size_t{32} << 20);
  EXPECT_EQ(s.chunk_bytes, size_t{4096});
  EXPECT_FALSE(s.compression);
  EXPECT_EQ(s.sparsity, 1.5f);
  EXPECT_EQ(s.scale_tile, size_t{1280});
  EXPECT_EQ(s.min_compress_bytes, size_t{0});
  EXPECT_EQ(s.allreduce, te::AllreduceAlgorithm::kRing);
  EXPECT_EQ(s.timeline, "/tmp/some timeline.json");
  EXPECT_TRUE(s.stats);
  EXPECT_EQ(s.stall_check_time, milliseconds(2500));
  EXPECT_EQ(s.stall_timeout, milliseconds(750));
  EXPECT_EQ(s.deadlock_timeout, milliseconds(3000));
  EXPECT_EQ(s.feedback_limit, 12.5);
  EXPECT_EQ(s.log_level, te::LogLevel::kDebug);
  EXPECT_EQ(s.cache_capacity, size_t{0});
}

TEST(EngineSettings, EdgeValues) {
  EXPECT_EQ(parse({{"THREELC_CYCLE_TIME_MS", "1000"}}).cycle_time, microseconds(1'000'000));
  EXPECT_EQ(parse({{"THREELC_CYCLE_TIME_MS", "0.0001"}}).cycle_time, microseconds(1));
  EXPECT_EQ(parse({{"THREELC_CYCLE_TIME_MS", "5"}}).cycle_time, microseconds(5000));
  EXPECT_EQ(parse({{"THREELC_FUSION_THRESHOLD", "0"}}).fusion_threshold, size_t{0});
  EXPECT_EQ(parse({{"THREELC_FUSION_THRESHOLD", "1G"}}).fusion_threshold, size_t{1} << 30);
  EXPECT_EQ(parse({{"THREELC_FUSION_THRESHOLD", "1000"}}).fusion_threshold, size_t{1000});
  EXPECT_EQ(parse({{"THREELC_CHUNK_BYTES", "1G"}}).chunk_bytes, size_t{1} << 30);
  EXPECT_EQ(parse({{"THREELC_CHUNK_BYTES", "4100"}}).chunk_bytes, size_t{4100});
  EXPECT_EQ(parse({{"THREELC_SPARSITY", "1"}}).sparsity, 1.0f);
  EXPECT_EQ(parse({{"THREELC_SPARSITY", "1.99"}}).sparsity, 1.99f);
  EXPECT_EQ(parse({{"THREELC_SCALE_TILE", "0"}}).scale_tile, size_t{0});
  EXPECT_EQ(parse({{"THREELC_SCALE_TILE", "5"}}).scale_tile, size_t{5});
  EXPECT_EQ(parse({{"THREELC_SCALE_TILE", "20480"}}).scale_tile, size_t{20480});
  EXPECT_EQ(parse({{"THREELC_STALL_CHECK_TIME", "0"}}).stall_check_time, milliseconds(0));
  EXPECT_EQ(parse({{"THREELC_STALL_CHECK_TIME", "0.0001"}}).stall_check_time, milliseconds(1));
  EXPECT_EQ(parse({{"THREELC_STALL_TIMEOUT", "0"}}).stall_timeout, milliseconds(0));
  EXPECT_EQ(parse({{"THREELC_STALL_TIMEOUT", "0.0001"}}).stall_timeout, milliseconds(1));
  EXPECT_EQ(parse({{"THREELC_STALL_TIMEOUT", "1e6"}}).stall_timeout, milliseconds(1'000'000'000));
  EXPECT_EQ(parse({{"THREELC_STALL_TIMEOUT", "1.1"}}).stall_timeout, milliseconds(1100));
  EXPECT_EQ(parse({{"THREELC_STALL_TIMEOUT", "0.0015"}}).stall_timeout, milliseconds(2));  // up
  EXPECT_EQ(parse({{"THREELC_DEADLOCK_TIMEOUT", "0"}}).deadlock_timeout, milliseconds(0));
  EXPECT_EQ(parse({{"THREELC_DEADLOCK_TIMEOUT", "0.0001"}}).deadlock_timeout, milliseconds(1));
  EXPECT_EQ(parse({{"THREELC_CYCLE_TIME_MS", "0.0012"}}).cycle_time, microseconds(2));  // up
  EXPECT_EQ(parse({{"THREELC_FEEDBACK_LIMIT", "0"}}).feedback_limit, 0.0);
  EXPECT_EQ(parse({{"THREELC_FEEDBACK_LIMIT", "1e12"}}).feedback_limit, 1e12);
  EXPECT_EQ(parse({{"THREELC_CACHE_CAPACITY", "1048576"}}).cache_capacity, size_t{1} << 20);
  EXPECT_EQ(parse({{"THREELC_COMPRESSION", "THREELC"}}).compression, true);
  EXPECT_EQ(parse({{"THREELC_ALLREDUCE", "Push_Pull"}}).allreduce,
            te::AllreduceAlgorithm::kPushPull);
  EXPECT_EQ(parse({{"THREELC_LOG_LEVEL", "Error"}}).log_level, te::LogLevel::kError);
  EXPECT_EQ(parse({{"THREELC_LOG_LEVEL", "trace"}}).log_level, te::LogLevel::kTrace);
}

TEST(EngineSettings, EmptyValueMeansUnset) {
  const auto s = parse({{"THREELC_CHUNK_BYTES", ""}, {"THREELC_LOG_LEVEL", ""}});
  EXPECT_EQ(s.chunk_bytes, size_t{1048576});
  EXPECT_EQ(s.log_level, te::LogLevel::kWarning);
}

TEST(EngineSettings, MalformedValuesNameTheVariableTheValueAndWhatIsAccepted) {
  const std::pair<const char*, const char*> cases[] = {
      {"THREELC_CYCLE_TIME_MS", "0"},
      {"THREELC_CYCLE_TIME_MS", "-1"},
      {"THREELC_CYCLE_TIME_MS", "1000.5"},
      {"THREELC_CYCLE_TIME_MS", "1ms"},
      {"THREELC_CYCLE_TIME_MS", "nan"},
      {"THREELC_CYCLE_TIME_MS", "inf"},
      {"THREELC_CYCLE_TIME_MS", " 1"},
      {"THREELC_FUSION_THRESHOLD", "-1"},
      {"THREELC_FUSION_THRESHOLD", "1.5"},
      {"THREELC_FUSION_THRESHOLD", "12X"},
      {"THREELC_FUSION_THRESHOLD", "K"},
      {"THREELC_FUSION_THRESHOLD", "+5"},
      {"THREELC_FUSION_THRESHOLD", "64MB"},
      {"THREELC_FUSION_THRESHOLD", "99999999999999999999"},
      {"THREELC_FUSION_THRESHOLD", "18014398509481984G"},
      {"THREELC_CHUNK_BYTES", "4095"},
      {"THREELC_CHUNK_BYTES", "4098"},
      {"THREELC_CHUNK_BYTES", "0"},
      {"THREELC_CHUNK_BYTES", "2G"},
      {"THREELC_COMPRESSION", "yes"},
      {"THREELC_COMPRESSION", "3lc"},
      {"THREELC_SPARSITY", "2"},
      {"THREELC_SPARSITY", "0.99"},
      {"THREELC_SPARSITY", "1.99999999999"},
      {"THREELC_SPARSITY", "one"},
      {"THREELC_SCALE_TILE", "1024"},
      {"THREELC_SCALE_TILE", "20485"},
      {"THREELC_SCALE_TILE", "-5"},
      {"THREELC_SCALE_TILE", "1K"},
      {"THREELC_MIN_COMPRESS_BYTES", "-5"},
      {"THREELC_ALLREDUCE", "tree"},
      {"THREELC_ALLREDUCE", "pushpull"},
      {"THREELC_STATS", "2"},
      {"THREELC_STATS", "true"},
      {"THREELC_STALL_CHECK_TIME", "-1"},
      {"THREELC_STALL_CHECK_TIME", "1e9"},
      {"THREELC_STALL_CHECK_TIME", "60s"},
      {"THREELC_STALL_TIMEOUT", "-1"},
      {"THREELC_STALL_TIMEOUT", "1e7"},
      {"THREELC_STALL_TIMEOUT", "10min"},
      {"THREELC_STALL_TIMEOUT", "inf"},
      {"THREELC_DEADLOCK_TIMEOUT", "-1"},
      {"THREELC_DEADLOCK_TIMEOUT", "1e7"},
      {"THREELC_DEADLOCK_TIMEOUT", "30s"},
      {"THREELC_FEEDBACK_LIMIT", "-1"},
      {"THREELC_FEEDBACK_LIMIT", "nan"},
      {"THREELC_FEEDBACK_LIMIT", "1e13"},
      {"THREELC_FEEDBACK_LIMIT", "100x"},
      {"THREELC_LOG_LEVEL", "verbose"},
      {"THREELC_LOG_LEVEL", "warn"},
      {"THREELC_CACHE_CAPACITY", "-1"},
      {"THREELC_CACHE_CAPACITY", "1048577"},
      {"THREELC_CACHE_CAPACITY", "1K"},
  };
  for (const auto& [name, value] : cases) {
    const std::string message = error_of(name, value);
    SCOPED_TRACE(std::string(name) + "=" + value);
    ASSERT_FALSE(message.empty());
    EXPECT_NE(message.find(name), std::string::npos) << message;
    EXPECT_NE(message.find(std::string("'") + value + "'"), std::string::npos) << message;
    EXPECT_NE(message.find("expected"), std::string::npos) << message;
  }
  EXPECT_NE(error_of("THREELC_CHUNK_BYTES", "4098").find("multiple of 4"), std::string::npos);
  EXPECT_NE(error_of("THREELC_LOG_LEVEL", "verbose").find("trace, debug, info, warning or error"),
            std::string::npos);
}

TEST(EngineSettings, ReadsTheProcessEnvironment) {
  setenv("THREELC_CHUNK_BYTES", "8192", 1);
  setenv("THREELC_STATS", "1", 1);
  const auto s = te::engine_settings_from_environment();
  unsetenv("THREELC_CHUNK_BYTES");
  unsetenv("THREELC_STATS");
  EXPECT_EQ(s.chunk_bytes, size_t{8192});
  EXPECT_TRUE(s.stats);
  setenv("THREELC_SPARSITY", "3", 1);
  EXPECT_THROW(te::engine_settings_from_environment(), std::invalid_argument);
  unsetenv("THREELC_SPARSITY");
}

TEST(EngineSettings, TableRowsAreComplete) {
  std::set<std::string> names;
  for (const auto& row : te::engine_setting_rows()) {
    const std::string name = row.name;
    EXPECT_EQ(name.rfind("THREELC_", 0), 0u) << name;
    EXPECT_TRUE(names.insert(name).second) << name << " twice";
    EXPECT_NE(std::string(row.accepted), "") << name;
    EXPECT_NE(std::string(row.meaning), "") << name;
  }
  EXPECT_EQ(names.size(), 20u);
  // The transport keeps its own variables: none is declared twice.
  for (const auto& row : threelc::transport::transport_settings().rows) {
    EXPECT_EQ(names.count(row.name), 0u) << row.name << " is in both tables";
  }
}

// README.md's one table lists every variable a user sets: the engine's and the transport's.
TEST(EngineSettings, ReadmeListsEveryVariable) {
  const std::string readme = read_source_file("README.md");
  const std::string configuration = read_source_file("docs/CONFIGURATION.md");
  ASSERT_FALSE(readme.empty());
  ASSERT_FALSE(configuration.empty());
  for (const auto& row : te::engine_setting_rows()) {
    const std::string cell = std::string("`") + row.name + "`";
    EXPECT_NE(readme.find("| " + cell), std::string::npos) << row.name << " missing in README.md";
    EXPECT_NE(configuration.find("| " + cell), std::string::npos)
        << row.name << " missing in docs/CONFIGURATION.md";
  }
  for (const auto& row : threelc::transport::transport_settings().rows) {
    const std::string name = row.name;
    if (name.rfind("THREELC_", 0) != 0) continue;  // mpirun's, srun's, torchrun's
    EXPECT_NE(readme.find("`" + name + "`"), std::string::npos) << name << " missing in README.md";
  }
}

// --- logger ---------------------------------------------------------------------------------

std::string logged(const te::Logger& logger, te::LogLevel level, std::string_view message) {
  std::FILE* sink = std::tmpfile();
  EXPECT_NE(sink, nullptr);
  te::Logger(logger.level(), logger.rank(), sink).log(level, message);
  std::rewind(sink);
  std::string text;
  char buffer[256];
  size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof buffer, sink)) > 0) text.append(buffer, n);
  std::fclose(sink);
  return text;
}

TEST(Logger, WritesOnePrefixedLinePerMessageLine) {
  const te::Logger logger(te::LogLevel::kWarning, 3);
  EXPECT_EQ(logged(logger, te::LogLevel::kWarning, "tensor x stalled"),
            "[threelc 3] WARNING: tensor x stalled\n");
  EXPECT_EQ(logged(logger, te::LogLevel::kError, "a\nb\n"),
            "[threelc 3] ERROR: a\n[threelc 3] ERROR: b\n");
  EXPECT_EQ(logged(te::Logger(te::LogLevel::kTrace, -1), te::LogLevel::kTrace, "early"),
            "[threelc] TRACE: early\n");
}

TEST(Logger, FiltersByLevel) {
  const te::Logger logger(te::LogLevel::kInfo, 0);
  EXPECT_FALSE(logger.enabled(te::LogLevel::kTrace));
  EXPECT_FALSE(logger.enabled(te::LogLevel::kDebug));
  EXPECT_TRUE(logger.enabled(te::LogLevel::kInfo));
  EXPECT_TRUE(logger.enabled(te::LogLevel::kError));
  EXPECT_EQ(logged(logger, te::LogLevel::kDebug, "hidden"), "");
  EXPECT_EQ(logged(logger, te::LogLevel::kInfo, "shown"), "[threelc 0] INFO: shown\n");
}

TEST(Logger, ParsesLevelNamesInAnyCase) {
  EXPECT_EQ(te::parse_log_level("Warning"), te::LogLevel::kWarning);
  EXPECT_EQ(te::parse_log_level("INFO"), te::LogLevel::kInfo);
  EXPECT_EQ(te::parse_log_level("warn"), std::nullopt);
  EXPECT_EQ(te::parse_log_level(""), std::nullopt);
  EXPECT_STREQ(te::log_level_name(te::LogLevel::kDebug), "DEBUG");
}

}  // namespace
