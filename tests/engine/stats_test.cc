// THREELC_STATS: what the collectives and the background loop report adds up.
#include "observe/stats.h"

#include <gtest/gtest.h>

#include <string>

namespace {

namespace te = threelc::engine;

te::PhaseEvent event(te::Phase phase, int64_t begin_ns, int64_t end_ns, size_t bytes = 0,
                     int peer = -1) {
  te::PhaseEvent e;
  e.phase = phase;
  e.begin_ns = begin_ns;
  e.end_ns = end_ns;
  e.bytes = bytes;
  e.peer = peer;
  return e;
}

TEST(Stats, SumsWireBytesAndPhaseTimes) {
  te::Stats stats(4);
  te::CollectiveObserver& observer = stats;
  observer.record(event(te::Phase::kCompress, 100, 350, 40));
  observer.record(event(te::Phase::kCompress, 1000, 1100, 40));
  observer.record(event(te::Phase::kSend, 200, 900, 1000, 1));
  observer.record(event(te::Phase::kSend, 300, 800, 500, 2));
  observer.record(event(te::Phase::kReceive, 400, 1400, 700, 3));
  observer.record(event(te::Phase::kDecompress, 1500, 1530, 700));
  observer.record(event(te::Phase::kReduce, 1600, 1610));
  observer.record(event(te::Phase::kCopy, 0, 20));
  observer.record(event(te::Phase::kCompress, 5000, 4000));  // backwards: counts nothing
  stats.add_negotiation(90);
  stats.add_fusion_copy(5);
  stats.add_cycle(2000);
  stats.add_cycle(3000);

  EXPECT_EQ(stats.bytes_sent(), 1500u);
  EXPECT_EQ(stats.bytes_received(), 700u);
  EXPECT_EQ(stats.phase_ns(te::StatsPhase::kCompress), 350);
  EXPECT_EQ(stats.phase_ns(te::StatsPhase::kSend), 1200);
  EXPECT_EQ(stats.phase_ns(te::StatsPhase::kReceive), 1000);
  EXPECT_EQ(stats.phase_ns(te::StatsPhase::kDecompress), 30);
  EXPECT_EQ(stats.phase_ns(te::StatsPhase::kReduce), 10);
  EXPECT_EQ(stats.phase_ns(te::StatsPhase::kFusionCopy), 25);
  EXPECT_EQ(stats.phase_ns(te::StatsPhase::kNegotiate), 90);
  EXPECT_EQ(stats.loop_ns(), 5000);
  EXPECT_EQ(stats.cycles(), 2u);
}

TEST(Stats, CountsCollectivesByKindAndCompression) {
  te::Stats stats(4);
  stats.collective_done("allreduce", 10, 4'000'000, true, 60'000);
  stats.collective_done("allreduce", 1, 1000, false, 1600);
  stats.collective_done("allreduce", 3, 8'000'000, true, 140'000);
  stats.collective_done("broadcast", 1, 400, false, 400);
  ASSERT_EQ(stats.by_kind().size(), 2u);
  const auto& allreduce = stats.by_kind().at("allreduce");
  EXPECT_EQ(allreduce.collectives, 3u);
  EXPECT_EQ(allreduce.tensors, 14u);
  EXPECT_EQ(allreduce.input_bytes, 12'001'000u);
  EXPECT_EQ(allreduce.wire_bytes, 201'600u);
  EXPECT_EQ(stats.by_kind().at("broadcast").collectives, 1u);
  EXPECT_EQ(stats.compressed().collectives, 2u);
  EXPECT_EQ(stats.compressed().tensors, 13u);
  EXPECT_EQ(stats.compressed().input_bytes, 12'000'000u);
  EXPECT_EQ(stats.compressed().wire_bytes, 200'000u);
  EXPECT_EQ(stats.uncompressed().tensors, 2u);
  EXPECT_EQ(stats.uncompressed().input_bytes, 1400u);
  // Uncompressed, 4 ranks would each send 2 * 3/4 of the 12 MB: 18 MB, 90 times the 200 kB.
  EXPECT_DOUBLE_EQ(stats.compression_ratio(), 90.0);
}

TEST(Stats, NoRatioWithoutTraffic) {
  te::Stats one_rank(1);
  one_rank.collective_done("allreduce", 1, 4'000'000, true, 0);
  EXPECT_EQ(one_rank.compression_ratio(), 0.0);
  te::Stats nothing(8);
  EXPECT_EQ(nothing.compression_ratio(), 0.0);
  const std::string report = nothing.report(5);
  EXPECT_NE(report.find("rank 5"), std::string::npos) << report;
  EXPECT_NE(report.find("collectives: none"), std::string::npos) << report;
  EXPECT_EQ(report.find("less traffic"), std::string::npos) << report;
}

TEST(Stats, ReportIsAFewReadableLines) {
  te::Stats stats(2);
  stats.record(event(te::Phase::kSend, 0, 1'500'000'000, 3 << 20, 1));
  stats.record(event(te::Phase::kReceive, 0, 250'000'000, 5 << 20, 1));
  stats.add_negotiation(10'000'000);
  stats.add_cycle(2'000'000'000);
  stats.collective_done("allreduce", 4, 64 << 20, true, 1 << 20);
  stats.collective_done("allgather", 1, 100, false, 100);
  const std::string report = stats.report(0);
  SCOPED_TRACE(report);
  EXPECT_EQ(report.rfind("statistics of rank 0 (2 ranks):", 0), 0u);
  EXPECT_NE(report.find("allgather 1 (1 tensors, 100 B)"), std::string::npos);
  EXPECT_NE(report.find("allreduce 1 (4 tensors, 64.00 MiB)"), std::string::npos);
  EXPECT_NE(report.find("sent 3.00 MiB, received 5.00 MiB"), std::string::npos);
  // 2 ranks: uncompressed would send 1/1 * 64 MiB; 1 MiB was sent.
  EXPECT_NE(report.find("64.0x less traffic than uncompressed"), std::string::npos);
  EXPECT_NE(report.find("background loop 2.000 s in 1 cycles"), std::string::npos);
  EXPECT_NE(report.find("negotiate 0.010 s"), std::string::npos);
  EXPECT_NE(report.find("send 1.500 s"), std::string::npos);
  EXPECT_NE(report.find("receive 0.250 s"), std::string::npos);
  size_t lines = 0;
  for (char c : report) lines += c == '\n';
  EXPECT_LE(lines, 8u);
  EXPECT_EQ(report.back(), '\n');
}

TEST(Stats, PhaseNames) {
  EXPECT_STREQ(te::stats_phase_name(te::StatsPhase::kNegotiate), "negotiate");
  EXPECT_STREQ(te::stats_phase_name(te::StatsPhase::kFusionCopy), "fusion copy");
  EXPECT_STREQ(te::stats_phase_name(te::StatsPhase::kReceive), "receive");
}

}  // namespace
