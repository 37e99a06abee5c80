// The parsers every layer's settings use (settings/src/parse.cc) and the refusal text.
#include <gtest/gtest.h>

#include "threelc/settings/setting.h"

namespace {

namespace ts = threelc::settings;

TEST(SettingParsers, IntegersAreDigitsOnlyAndBounded) {
  EXPECT_EQ(ts::parse_integer("0", 10), 0u);
  EXPECT_EQ(ts::parse_integer("10", 10), 10u);
  EXPECT_EQ(ts::parse_integer("11", 10), std::nullopt);
  for (const char* bad : {"", "-1", "+1", " 1", "1 ", "1.0", "0x10", "1k"}) {
    EXPECT_EQ(ts::parse_integer(bad, 100), std::nullopt) << bad;
  }
  EXPECT_EQ(ts::parse_integer("18446744073709551616", UINT64_MAX), std::nullopt);  // 2^64
}

TEST(SettingParsers, BytesTakeOneBinarySuffixInAnyCase) {
  EXPECT_EQ(ts::parse_bytes("4096", 1 << 20), 4096u);
  EXPECT_EQ(ts::parse_bytes("4k", 1 << 20), 4096u);
  EXPECT_EQ(ts::parse_bytes("1M", 1 << 20), 1u << 20);
  EXPECT_EQ(ts::parse_bytes("2M", 1 << 20), std::nullopt);  // over the maximum
  EXPECT_EQ(ts::parse_bytes("1G", uint64_t{1} << 30), uint64_t{1} << 30);
  for (const char* bad : {"", "K", "1KB", "1T", "-1K", "1.5M"}) {
    EXPECT_EQ(ts::parse_bytes(bad, uint64_t{1} << 40), std::nullopt) << bad;
  }
}

TEST(SettingParsers, NumbersAreFiniteAndUnsigned) {
  EXPECT_EQ(ts::parse_number("0.5"), 0.5);
  EXPECT_EQ(ts::parse_number("2.5e-1"), 0.25);
  for (const char* bad : {"", "-1", "+1", "inf", "nan", "1e999", "0x1p3", "1,5", "1 "}) {
    EXPECT_EQ(ts::parse_number(bad), std::nullopt) << bad;
  }
}

TEST(SettingParsers, FlagsChoicesAndHostPorts) {
  EXPECT_EQ(ts::parse_flag("1"), true);
  EXPECT_EQ(ts::parse_flag("0"), false);
  EXPECT_EQ(ts::parse_flag("yes"), std::nullopt);
  EXPECT_EQ(ts::parse_choice("RING", {"push_pull", "ring"}), 1u);
  EXPECT_EQ(ts::parse_choice("rings", {"push_pull", "ring"}), std::nullopt);
  const auto v4 = ts::parse_host_port("10.0.0.1:29500");
  ASSERT_TRUE(v4);
  EXPECT_EQ(v4->host, "10.0.0.1");
  EXPECT_EQ(v4->port, 29500);
  const auto v6 = ts::parse_host_port("[::1]:7");
  ASSERT_TRUE(v6);
  EXPECT_EQ(v6->host, "::1");
  for (const char* bad : {"", "host", ":80", "host:", "host:0", "host:65536", "host:8o"}) {
    EXPECT_FALSE(ts::parse_host_port(bad)) << bad;
  }
}

TEST(SettingRows, RefusalNamesTheVariableTheValueAndWhatIsAccepted) {
  constexpr ts::Setting row{"THREELC_EXAMPLE", ts::Type::kFlag, "0", "0 or 1", "an example"};
  EXPECT_EQ(ts::refusal(row, "2"), "THREELC_EXAMPLE='2' is not accepted: expected 0 or 1");
  EXPECT_STREQ(ts::type_name(ts::Type::kHostPort), "host:port");
  const auto unset = [](std::string_view) -> std::optional<std::string> { return ""; };
  EXPECT_EQ(ts::value_or_default(row, unset), "0");
  const auto set = [](std::string_view) -> std::optional<std::string> { return "1"; };
  EXPECT_EQ(ts::value_or_default(row, set), "1");
  const ts::Setting rows[] = {row};
  EXPECT_EQ(ts::find(rows, "THREELC_EXAMPLE"), &rows[0]);
  EXPECT_EQ(ts::find(rows, "THREELC_OTHER"), nullptr);
}

}  // namespace
