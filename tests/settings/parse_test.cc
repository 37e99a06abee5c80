// The parsers every layer's settings use (settings/src/parse.cc) and the refusal text.
#include <gtest/gtest.h>

#include "threelc/settings/row.h"
#include "threelc/settings/setting.h"

namespace {

namespace ts = threelc::settings;
using std::chrono::microseconds;
using std::chrono::milliseconds;

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

TEST(SettingParsers, BoundsAreTheRowsOwn) {
  EXPECT_EQ(ts::parse_integer("0", 1, 10), std::nullopt);
  EXPECT_EQ(ts::parse_integer("1", 1, 10), 1u);
  EXPECT_EQ(ts::parse_integer("11", 1, 10), std::nullopt);
  const ts::Range half_open{.low = 1, .high = 2, .high_open = true};
  EXPECT_EQ(ts::parse_number("1", half_open), 1.0);
  EXPECT_EQ(ts::parse_number("2", half_open), std::nullopt);
  EXPECT_EQ(ts::parse_number("0.99", half_open), std::nullopt);
  const ts::Range positive{.low = 0, .high = 10, .low_open = true};
  EXPECT_EQ(ts::parse_number("0", positive), std::nullopt);
  EXPECT_EQ(ts::parse_number("10", positive), 10.0);
}

// One parser for seconds and one for milliseconds: rounded up to the next unit, so a positive
// value never becomes 0, and a decimal that names a whole unit stays that unit.
TEST(SettingParsers, DurationsRoundUpToTheirUnit) {
  const ts::Range seconds{.low = 0, .high = 1e7};
  EXPECT_EQ(ts::parse_seconds("0", seconds), milliseconds(0));
  EXPECT_EQ(ts::parse_seconds("0.0001", seconds), milliseconds(1));
  EXPECT_EQ(ts::parse_seconds("0.0015", seconds), milliseconds(2));
  EXPECT_EQ(ts::parse_seconds("1.1", seconds), milliseconds(1100));
  EXPECT_EQ(ts::parse_seconds("0.25", seconds), milliseconds(250));
  EXPECT_EQ(ts::parse_seconds("1e7", seconds), milliseconds(10'000'000'000));
  EXPECT_EQ(ts::parse_seconds("1.00000001e7", seconds), std::nullopt);
  EXPECT_EQ(ts::parse_seconds("-1", seconds), std::nullopt);
  EXPECT_EQ(ts::parse_seconds("60s", seconds), std::nullopt);
  const ts::Range ms{.low = 0, .high = 1000, .low_open = true};
  EXPECT_EQ(ts::parse_milliseconds("0.3", ms), microseconds(300));
  EXPECT_EQ(ts::parse_milliseconds("0.0001", ms), microseconds(1));
  EXPECT_EQ(ts::parse_milliseconds("1000", ms), microseconds(1'000'000));
  EXPECT_EQ(ts::parse_milliseconds("0", ms), std::nullopt);
}

TEST(SettingParsers, ChoicesStandForValues) {
  EXPECT_EQ(ts::parse_choice_value<int>("NONE", {{"threelc", 1}, {"none", 2}}), 2);
  EXPECT_EQ(ts::parse_choice_value<int>("3lc", {{"threelc", 1}, {"none", 2}}), std::nullopt);
}

// A target as a layer has one, and its rows.
struct Example {
  uint64_t count = 0;
  std::string name;
};

constexpr std::array kExampleRows = {
    ts::Row<Example>{
        {"THREELC_EXAMPLE_COUNT", ts::Type::kInteger, "3", "an integer up to 9", "a count"},
        [](std::string_view v, Example& e) {
          return ts::assign(e.count, ts::parse_integer(v, 9));
        }},
    ts::Row<Example>{{"THREELC_EXAMPLE_NAME", ts::Type::kText, "x", "any text", "a name"},
                     [](std::string_view v, Example& e) { return ts::assign_text(e.name, v); }},
    ts::Row<Example>{{"THREELC_EXAMPLE_DOC", ts::Type::kText, "", "set by someone", "a note"}},
};

TEST(SettingRows, ReadRowsAppliesValuesOrDefaultsAndRefusesTheFirstMalformed) {
  Example defaults;
  EXPECT_EQ(ts::read_rows<Example>(kExampleRows, ts::no_variables, defaults), std::nullopt);
  EXPECT_EQ(defaults.count, 3u);
  EXPECT_EQ(defaults.name, "x");
  Example set;
  const auto lookup = [](std::string_view name) -> std::optional<std::string> {
    if (name == "THREELC_EXAMPLE_NAME") return "y";
    if (name == "THREELC_EXAMPLE_DOC") return "whatever";  // only documented: never refused
    return std::nullopt;
  };
  EXPECT_EQ(ts::read_rows<Example>(kExampleRows, lookup, set), std::nullopt);
  EXPECT_EQ(set.name, "y");
  const auto malformed = [](std::string_view name) -> std::optional<std::string> {
    if (name == "THREELC_EXAMPLE_COUNT") return "10";
    return std::nullopt;
  };
  EXPECT_EQ(ts::read_rows<Example>(kExampleRows, malformed, set),
            "THREELC_EXAMPLE_COUNT='10' is not accepted: expected an integer up to 9");
  EXPECT_EQ(set.count, 3u);  // unchanged
}

TEST(SettingRows, TablesAreNamedAndJoinedAtCompileTime) {
  static_assert(ts::index_of(kExampleRows, "THREELC_EXAMPLE_NAME") == 1);
  // ts::index_of(kExampleRows, "THREELC_EXAMPLE_NAM") does not compile.
  constexpr auto joined = ts::join(kExampleRows, kExampleRows);
  static_assert(joined.size() == 6);
  constexpr auto docs = ts::documentation(kExampleRows);
  static_assert(std::string_view(docs[2].name) == "THREELC_EXAMPLE_DOC");
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
