// The Chrome-trace timeline: the file parses as JSON (a small parser here, and Python's json when
// /usr/bin/python3 exists), holds the events written, escapes names, survives a crash.
#include "observe/timeline.h"

#include "collectives/observer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

namespace te = threelc::engine;

// --- a minimal JSON reader, enough to check the timeline's events ---------------------------

struct Json {
  enum Kind { kNull, kBool, kNumber, kString, kArray, kObject } kind = kNull;
  bool boolean = false;
  double number = 0;
  std::string text;
  std::vector<Json> items;
  std::map<std::string, Json> members;

  const Json& operator[](const std::string& key) const {
    static const Json kMissing;
    const auto found = members.find(key);
    return found == members.end() ? kMissing : found->second;
  }
  bool has(const std::string& key) const { return members.count(key) != 0; }
};

class JsonReader {
 public:
  explicit JsonReader(std::string_view text) : text_(text) {}

  Json document() {
    Json value = parse_value();
    skip_space();
    if (pos_ != text_.size()) fail("trailing characters");
    return value;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw std::runtime_error("JSON: " + what + " at offset " + std::to_string(pos_));
  }
  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\n' ||
                                   text_[pos_] == '\r' || text_[pos_] == '\t')) {
      ++pos_;
    }
  }
  char peek() {
    skip_space();
    if (pos_ >= text_.size()) fail("unexpected end");
    return text_[pos_];
  }
  void expect(char c) {
    if (peek() != c) fail(std::string("expected '") + c + "'");
    ++pos_;
  }
  bool literal(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }

  Json parse_value() {
    Json value;
    const char c = peek();
    if (c == '{') {
      value.kind = Json::kObject;
      ++pos_;
      if (peek() == '}') {
        ++pos_;
        return value;
      }
      for (;;) {
        if (peek() != '"') fail("expected a key");
        std::string key = parse_string();
        expect(':');
        value.members[key] = parse_value();
        if (peek() == ',') {
          ++pos_;
          continue;
        }
        expect('}');
        return value;
      }
    }
    if (c == '[') {
      value.kind = Json::kArray;
      ++pos_;
      if (peek() == ']') {
        ++pos_;
        return value;
      }
      for (;;) {
        value.items.push_back(parse_value());
        if (peek() == ',') {
          ++pos_;
          continue;
        }
        expect(']');
        return value;
      }
    }
    if (c == '"') {
      value.kind = Json::kString;
      value.text = parse_string();
      return value;
    }
    if (literal("true") || literal("false")) {
      value.kind = Json::kBool;
      value.boolean = text_[pos_ - 1] == 'e' && text_[pos_ - 2] == 'u';
      return value;
    }
    if (literal("null")) return value;
    // Number: -? digits (. digits)? ([eE] [+-]? digits)?
    const size_t start = pos_;
    if (text_[pos_] == '-') ++pos_;
    const auto digits = [&] {
      const size_t from = pos_;
      while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') ++pos_;
      if (pos_ == from) fail("expected digits");
    };
    digits();
    if (pos_ < text_.size() && text_[pos_] == '.') {
      ++pos_;
      digits();
    }
    if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
      ++pos_;
      if (pos_ < text_.size() && (text_[pos_] == '+' || text_[pos_] == '-')) ++pos_;
      digits();
    }
    value.kind = Json::kNumber;
    value.number = std::strtod(std::string(text_.substr(start, pos_ - start)).c_str(), nullptr);
    return value;
  }

  std::string parse_string() {
    expect('"');
    std::string out;
    for (;;) {
      if (pos_ >= text_.size()) fail("unterminated string");
      const auto c = static_cast<unsigned char>(text_[pos_++]);
      if (c == '"') return out;
      if (c < 0x20) fail("control character in a string");
      if (c != '\\') {
        out += static_cast<char>(c);
        continue;
      }
      if (pos_ >= text_.size()) fail("unterminated escape");
      const char e = text_[pos_++];
      switch (e) {
        case '"':
        case '\\':
        case '/':
          out += e;
          break;
        case 'n':
          out += '\n';
          break;
        case 't':
          out += '\t';
          break;
        case 'r':
          out += '\r';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'u': {
          if (pos_ + 4 > text_.size()) fail("short \\u escape");
          const unsigned code =
              static_cast<unsigned>(std::stoul(std::string(text_.substr(pos_, 4)), nullptr, 16));
          pos_ += 4;
          // Enough for the tests: BMP code points as UTF-8.
          if (code < 0x80) {
            out += static_cast<char>(code);
          } else if (code < 0x800) {
            out += static_cast<char>(0xC0 | (code >> 6));
            out += static_cast<char>(0x80 | (code & 0x3F));
          } else {
            out += static_cast<char>(0xE0 | (code >> 12));
            out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
            out += static_cast<char>(0x80 | (code & 0x3F));
          }
          break;
        }
        default:
          fail("bad escape");
      }
    }
  }

  std::string_view text_;
  size_t pos_ = 0;
};

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

class TimelineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = (std::filesystem::temp_directory_path() /
             ("threelc_timeline_" + std::to_string(::getpid()) + "_" + info->name() + ".json"))
                .string();
  }
  void TearDown() override { std::filesystem::remove(path_); }

  // The events of the closed file, after checking it with Python's json module too.
  std::vector<Json> events() const {
    if (::access("/usr/bin/python3", X_OK) == 0) {
      const std::string command =
          "/usr/bin/python3 -c 'import json,sys; json.load(open(sys.argv[1], encoding=\"utf-8\"))' "
          "'" +
          path_ + "'";
      EXPECT_EQ(std::system(command.c_str()), 0) << "python's json rejects " << path_;
    }
    Json document = JsonReader(read_all(path_)).document();
    EXPECT_EQ(document.kind, Json::kArray);
    return document.items;
  }

  static std::vector<Json> of_phase(const std::vector<Json>& all, const std::string& ph) {
    std::vector<Json> out;
    for (const auto& event : all) {
      if (event["ph"].text == ph) out.push_back(event);
    }
    return out;
  }

  std::string path_;
};

constexpr int64_t kStart = 5'000'000'000;  // steady-clock ns of the trace's time 0

TEST_F(TimelineTest, SpansGetOneNamedRowPerTensor) {
  {
    te::Timeline timeline(path_, 2, kStart);
    timeline.span("grad/fc1", "compress", kStart + 1'500, kStart + 4'000, 1234);
    timeline.span("grad/fc1", "send", kStart + 4'000, kStart + 10'250, 1234, 3);
    timeline.span("grad/fc2", "negotiate", kStart + 2'000'000, kStart + 3'000'000);
    timeline.instant("grad/fc2", "done", kStart + 3'000'000);
    timeline.counter("bytes in flight", kStart + 7'000, 4096);
    timeline.close();
    timeline.close();  // no-op
  }
  const auto all = events();

  const auto metadata = of_phase(all, "M");
  std::map<std::string, int> rows;  // thread name -> tid
  for (const auto& event : metadata) {
    EXPECT_EQ(event["pid"].number, 2);
    if (event["name"].text == "thread_name") {
      rows[event["args"]["name"].text] = static_cast<int>(event["tid"].number);
    }
    if (event["name"].text == "process_name") {
      EXPECT_EQ(event["args"]["name"].text, "threelc rank 2");
    }
  }
  ASSERT_EQ(rows.size(), 2u);
  ASSERT_TRUE(rows.count("grad/fc1"));
  ASSERT_TRUE(rows.count("grad/fc2"));
  EXPECT_NE(rows["grad/fc1"], rows["grad/fc2"]);

  const auto spans = of_phase(all, "X");
  ASSERT_EQ(spans.size(), 3u);
  EXPECT_EQ(spans[0]["name"].text, "compress");
  EXPECT_EQ(spans[0]["tid"].number, rows["grad/fc1"]);
  EXPECT_DOUBLE_EQ(spans[0]["ts"].number, 1.5);
  EXPECT_DOUBLE_EQ(spans[0]["dur"].number, 2.5);
  EXPECT_EQ(spans[0]["args"]["bytes"].number, 1234);
  EXPECT_FALSE(spans[0]["args"].has("peer"));
  EXPECT_EQ(spans[1]["name"].text, "send");
  EXPECT_DOUBLE_EQ(spans[1]["ts"].number, 4.0);
  EXPECT_DOUBLE_EQ(spans[1]["dur"].number, 6.25);
  EXPECT_EQ(spans[1]["args"]["peer"].number, 3);
  EXPECT_EQ(spans[2]["tid"].number, rows["grad/fc2"]);
  EXPECT_DOUBLE_EQ(spans[2]["ts"].number, 2000.0);
  EXPECT_DOUBLE_EQ(spans[2]["dur"].number, 1000.0);
  EXPECT_FALSE(spans[2].has("args"));

  const auto instants = of_phase(all, "i");
  ASSERT_EQ(instants.size(), 1u);
  EXPECT_EQ(instants[0]["name"].text, "done");
  EXPECT_EQ(instants[0]["tid"].number, rows["grad/fc2"]);
  EXPECT_DOUBLE_EQ(instants[0]["ts"].number, 3000.0);

  const auto counters = of_phase(all, "C");
  ASSERT_EQ(counters.size(), 1u);
  EXPECT_EQ(counters[0]["name"].text, "bytes in flight");
  EXPECT_EQ(counters[0]["args"]["value"].number, 4096);
}

TEST_F(TimelineTest, EscapesTensorNames) {
  const std::string awkward = std::string("a\"b\\c\nd\te\x01") + "f\xC3\xA9g" + "\xFF";
  {
    te::Timeline timeline(path_, 0, kStart);
    timeline.span(awkward, "compress", kStart, kStart + 1000);
  }  // the destructor closes
  std::string name;
  for (const auto& event : of_phase(events(), "M")) {
    if (event["name"].text == "thread_name") name = event["args"]["name"].text;
  }
  // Control characters kept (escaped), valid UTF-8 kept, the invalid byte replaced by U+FFFD.
  EXPECT_EQ(name, std::string("a\"b\\c\nd\te\x01") + "f\xC3\xA9g" + "\xEF\xBF\xBD");
  EXPECT_EQ(te::json_escape("x\"y"), "x\\\"y");
  EXPECT_EQ(te::json_escape("\x1f"), "\\u001f");
  EXPECT_EQ(te::json_escape("\xED\xA0\x80"), "\\ufffd\\ufffd\\ufffd");  // a surrogate
  EXPECT_EQ(te::json_escape("\xF0\x9F\x98\x80"), "\xF0\x9F\x98\x80");   // U+1F600 stays
}

TEST_F(TimelineTest, EventsBeforeTheStartAndBackwardSpans) {
  {
    te::Timeline timeline(path_, 0, kStart);
    timeline.span("t", "compress", kStart - 2'500, kStart - 1'000);
    timeline.span("t", "send", kStart + 5'000, kStart + 4'000);               // end before begin
    timeline.counter("c", kStart, std::numeric_limits<double>::quiet_NaN());  // skipped
  }
  const auto all = events();
  const auto spans = of_phase(all, "X");
  ASSERT_EQ(spans.size(), 2u);
  EXPECT_DOUBLE_EQ(spans[0]["ts"].number, -2.5);
  EXPECT_DOUBLE_EQ(spans[0]["dur"].number, 1.5);
  EXPECT_DOUBLE_EQ(spans[1]["dur"].number, 0.0);
  EXPECT_TRUE(of_phase(all, "C").empty());
}

TEST_F(TimelineTest, AFlushedUnclosedFileOnlyLacksTheClosingBracket) {
  const int64_t start = te::steady_now_ns();
  auto timeline = std::make_unique<te::Timeline>(path_, 0, start);
  timeline->span("t", "compress", start, start + 1000);
  // Buffered until a second has passed since the last flush (the open).
  EXPECT_EQ(read_all(path_).find("compress"), std::string::npos);
  timeline->flush_if_due(start + 1'000'000'000);
  // What a crashed run leaves: everything written so far, no "]".
  std::string text = read_all(path_);
  EXPECT_NE(text.find("compress"), std::string::npos);
  EXPECT_EQ(text.find(']'), std::string::npos) << text;
  text += "\n]";
  const auto document = JsonReader(text).document();
  EXPECT_EQ(of_phase(document.items, "X").size(), 1u);
  timeline.reset();
  text = read_all(path_);
  ASSERT_GE(text.size(), 2u);
  EXPECT_EQ(text.substr(text.size() - 2), "]\n");
}

TEST_F(TimelineTest, UnopenablePathIsAnErrorNamingIt) {
  const std::string bad = "/nonexistent-threelc-dir/timeline.json";
  try {
    te::Timeline timeline(bad);
    FAIL() << "opened " << bad;
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
  }
}

TEST_F(TimelineTest, ManyEventsStayValid) {
  {
    te::Timeline timeline(path_, 1, kStart);
    for (int64_t i = 0; i < 2000; ++i) {
      const std::string tensor = "layer" + std::to_string(i % 37);
      timeline.span(tensor, i % 2 == 0 ? "compress" : "receive", kStart + i * 1000,
                    kStart + i * 1000 + 700, static_cast<size_t>(i), static_cast<int>(i % 4));
    }
  }
  const auto all = events();
  EXPECT_EQ(of_phase(all, "X").size(), 2000u);
  size_t names = 0;
  for (const auto& event : of_phase(all, "M")) names += event["name"].text == "thread_name";
  EXPECT_EQ(names, 37u);
}

}  // namespace
