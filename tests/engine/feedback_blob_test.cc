// Error-feedback checkpoints: the blob format (engine/src/feedback_blob.h, docs/WIRE_FORMAT.md)
// byte by byte and against every malformation, and the store's save / load on top of it
// (prefixes, rank and size checks, nothing changed on error, a save waiting for a collective).
#include "feedback_blob.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "engine_error.h"
#include "error_feedback.h"
#include "threelc/threelc.h"

namespace {

namespace te = threelc::engine;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Builds blobs by hand, field by field, to write malformed ones.
class Bytes {
 public:
  Bytes& raw(const std::string& s) {
    for (char c : s) bytes_.push_back(static_cast<std::byte>(c));
    return *this;
  }
  Bytes& u32(uint32_t v) { return put(&v, sizeof v); }
  Bytes& u64(uint64_t v) { return put(&v, sizeof v); }
  Bytes& f32s(const std::vector<float>& v) { return put(v.data(), v.size() * sizeof(float)); }
  Bytes& header(uint32_t count, uint32_t rank = 0, uint32_t size = 2) {
    return raw("3LCF").u32(1).u32(rank).u32(size).u64(count);
  }
  Bytes& entry(const std::string& name, const std::vector<float>& values) {
    return u32(static_cast<uint32_t>(name.size())).raw(name).u64(values.size()).f32s(values);
  }
  std::vector<std::byte>& get() { return bytes_; }

 private:
  Bytes& put(const void* p, size_t n) {
    const auto* b = static_cast<const std::byte*>(p);
    bytes_.insert(bytes_.end(), b, b + n);
    return *this;
  }
  std::vector<std::byte> bytes_;
};

std::vector<std::byte> write(uint32_t rank, uint32_t size,
                             const std::vector<te::FeedbackEntryView>& entries) {
  std::vector<std::byte> out(te::feedback_blob_size(entries));
  te::write_feedback_blob(rank, size, entries, out);
  return out;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

// The parse error of `bytes`, which must be malformed.
std::string malformed(const std::vector<std::byte>& bytes) {
  try {
    te::parse_feedback_blob(bytes);
  } catch (const te::FeedbackBlobError& e) {
    return e.what();
  }
  ADD_FAILURE() << "a malformed blob of " << bytes.size() << " bytes was accepted";
  return "";
}

void expect_malformed(const std::vector<std::byte>& bytes, const std::string& field,
                      size_t offset) {
  const std::string message = malformed(bytes);
  EXPECT_TRUE(contains(message, field)) << message;
  EXPECT_TRUE(contains(message, "(offset " + std::to_string(offset) + " of ")) << message;
}

// ------------------------------------------------------------------------------ the format

TEST(FeedbackBlob, LayoutIsTheDocumentedOne) {
  const std::vector<float> b = {1.5f, -2.0f};
  const std::vector<float> a = {0.25f};
  // Written in the caller's order (sorted by the store): "a" then "bb".
  const std::vector<std::byte> blob = write(3, 4, {{"a", a}, {"bb", b}});
  const std::vector<std::byte> want =
      Bytes().header(2, 3, 4).entry("a", {0.25f}).entry("bb", {1.5f, -2.0f}).get();
  EXPECT_EQ(blob, want);
  EXPECT_EQ(blob.size(), 24u + (4 + 1 + 8 + 4) + (4 + 2 + 8 + 8));
  EXPECT_EQ(te::feedback_blob_size({}), te::kFeedbackBlobHeaderBytes);
  // Byte 0..3 spell the magic; the version is a little-endian 1.
  EXPECT_EQ(static_cast<char>(blob[0]), '3');
  EXPECT_EQ(static_cast<char>(blob[3]), 'F');
  EXPECT_EQ(blob[4], std::byte{1});
  EXPECT_EQ(blob[5], std::byte{0});
}

TEST(FeedbackBlob, RoundTripKeepsEveryBit) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> odd = {-0.0f,
                                  nan,
                                  std::numeric_limits<float>::denorm_min(),
                                  std::numeric_limits<float>::infinity(),
                                  3.0e38f,
                                  -1e-30f};
  std::vector<float> big(100'003);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<float>(i % 97) * 0.125f - 6.0f;
  const std::vector<float> empty;
  const std::string unicode =
      "gr\xc3\xa4"
      "dient/\xe2\x88\x87w/\xf0\x9f\x99\x82";  // UTF-8
  const std::string longest(te::kFeedbackNameMaxBytes, 'n');
  const std::vector<te::FeedbackEntryView> entries = {
      {"allreduce.fc1.weight", big}, {"e", empty}, {unicode, odd}, {longest, odd}};
  const std::vector<std::byte> bytes = write(1, 3, entries);
  const te::FeedbackBlob blob = te::parse_feedback_blob(bytes);
  EXPECT_EQ(blob.rank, 1u);
  EXPECT_EQ(blob.size, 3u);
  ASSERT_EQ(blob.entries.size(), entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    EXPECT_EQ(blob.entries[i].first, entries[i].name);
    EXPECT_TRUE(same_bits(blob.entries[i].second,
                          std::vector<float>(entries[i].values.begin(), entries[i].values.end())))
        << "entry " << i;
  }
  const te::FeedbackBlob none = te::parse_feedback_blob(write(0, 1, {}));
  EXPECT_EQ(none.rank, 0u);
  EXPECT_EQ(none.size, 1u);
  EXPECT_TRUE(none.entries.empty());
}

TEST(FeedbackBlob, NamesTheBlobCannotHold) {
  EXPECT_EQ(te::feedback_name_problem("allreduce.w"), "");
  EXPECT_EQ(te::feedback_name_problem(std::string(4096, 'x')), "");
  EXPECT_TRUE(contains(te::feedback_name_problem(""), "empty"));
  EXPECT_TRUE(contains(te::feedback_name_problem(std::string(4097, 'x')), "4097 bytes"));
  EXPECT_TRUE(contains(te::feedback_name_problem(std::string("a\0b", 3)), "NUL byte at byte 1"));
  // A lone continuation byte, a cut sequence, an overlong '/', a surrogate, beyond U+10FFFF.
  for (const char* bad : {"a\x80", "ab\xc3", "\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80"}) {
    EXPECT_TRUE(contains(te::feedback_name_problem(bad), "not valid UTF-8")) << bad;
  }
}

TEST(FeedbackBlob, HeaderFieldsAreChecked) {
  expect_malformed({}, "truncated in the magic", 0);
  expect_malformed(Bytes().raw("3LC").get(), "truncated in the magic", 0);
  expect_malformed(Bytes().raw("3LCF").u32(1).get(), "truncated in the rank", 8);
  expect_malformed(Bytes().raw("3LCF").u32(1).u32(0).u32(2).u32(0).get(),
                   "truncated in the entry count", 16);
  expect_malformed(Bytes().raw("3LCT").u32(1).u32(0).u32(2).u64(0).get(), "magic", 0);
  expect_malformed(Bytes().raw("3LCF").u32(2).u32(0).u32(2).u64(0).get(), "version 2", 4);
  expect_malformed(Bytes().raw("3LCF").u32(1).u32(2).u32(2).u64(0).get(),
                   "rank 2 is not below size 2", 8);
  expect_malformed(Bytes().raw("3LCF").u32(1).u32(0).u32(0).u64(0).get(), "size 0", 8);
  // One entry announced, none there; then 2^63 entries.
  expect_malformed(Bytes().header(1).get(), "entry count 1 cannot fit", 16);
  expect_malformed(Bytes().raw("3LCF").u32(1).u32(0).u32(2).u64(uint64_t{1} << 63).get(),
                   "entry count 9223372036854775808 cannot fit", 16);
}

TEST(FeedbackBlob, EntryFieldsAreChecked) {
  // Entry 0's name length sits at offset 24, its name at 28.
  expect_malformed(Bytes().header(1).u32(0).u64(0).u32(0).get(), "entry 0's name length is 0", 24);
  expect_malformed(Bytes().header(1).u32(4097).raw(std::string(4097, 'x')).u64(0).get(),
                   "entry 0's name length is 4097", 24);
  expect_malformed(Bytes().header(1).entry(std::string("a\0b", 3), {}).get(),
                   "entry 0's name contains a NUL byte", 28);
  expect_malformed(Bytes().header(1).entry("w\xff", {}).get(), "entry 0's name is not valid UTF-8",
                   28);
  // A name length reaching past the end: the name itself is truncated.
  expect_malformed(Bytes().header(1).u32(200).raw("abc").u64(0).get(),
                   "truncated in entry 0's name", 28);
  // Entry 1 starts at 24 + 4 + 1 + 8 + 4 = 41; its name at 45.
  expect_malformed(Bytes().header(2).entry("a", {1.0f}).entry("a", {2.0f}).get(), "duplicate name",
                   45);
  expect_malformed(Bytes().header(2).entry("b", {1.0f}).entry("a", {2.0f}).get(),
                   "increasing byte order", 45);
  // Element counts: one value too many for the bytes left, one that overflows any size, and
  // one that wraps around when multiplied by 4.
  expect_malformed(Bytes().header(1).u32(1).raw("w").u64(3).f32s({1.0f, 2.0f}).get(),
                   "entry 0 ('w')'s element count 3 needs 12 bytes, 8 left", 29);
  expect_malformed(Bytes().header(1).u32(1).raw("w").u64(~uint64_t{0}).f32s({1.0f}).get(),
                   "element count", 29);
  expect_malformed(Bytes().header(1).u32(1).raw("w").u64(uint64_t{1} << 62).f32s({1.0f}).get(),
                   "element count", 29);
  // Trailing bytes after the last entry, named with their offset.
  std::vector<std::byte> trailing = Bytes().header(1).entry("w", {1.0f}).get();
  const size_t end = trailing.size();
  trailing.push_back(std::byte{0});
  expect_malformed(trailing, "1 trailing byte after the last entry", end);
}

TEST(FeedbackBlob, EveryTruncationAndEveryByteFlipIsSafe) {
  const std::vector<float> v = {1.0f, -2.0f, 0.5f};
  const std::vector<std::byte> blob = write(0, 2, {{"a", v}, {"bc", v}, {"d", {}}});
  ASSERT_NO_THROW(te::parse_feedback_blob(blob));
  for (size_t n = 0; n < blob.size(); ++n) {
    const std::string message = malformed(std::vector<std::byte>(blob.begin(), blob.begin() + n));
    EXPECT_TRUE(contains(message, "(offset ")) << n << ": " << message;
  }
  // Any byte changed either still parses (a value, a rank) or is refused with an error: never a
  // crash or a read outside the blob.
  for (size_t i = 0; i < blob.size(); ++i) {
    for (int flip : {0x01, 0x80, 0xFF}) {
      std::vector<std::byte> bad = blob;
      bad[i] ^= static_cast<std::byte>(flip);
      try {
        te::parse_feedback_blob(bad);
      } catch (const te::FeedbackBlobError&) {
      }
    }
  }
}

// ------------------------------------------------------------------------------ the store

void fill(te::ErrorFeedbackStore& store, const std::string& name, std::vector<float> values) {
  const std::span<float> buffer = store.get(name, values.size());
  std::copy(values.begin(), values.end(), buffer.begin());
}

std::vector<float> values(te::ErrorFeedbackStore& store, const std::string& name, size_t n) {
  EXPECT_TRUE(store.contains(name)) << name;
  const std::span<float> buffer = store.get(name, n);
  return {buffer.begin(), buffer.end()};
}

std::vector<std::byte> save(te::ErrorFeedbackStore& store, const std::string& prefix,
                            uint32_t rank = 0, uint32_t size = 2) {
  std::vector<std::byte> out(store.save(prefix, rank, size, {}));
  EXPECT_EQ(store.save(prefix, rank, size, out), out.size());
  return out;
}

// The EngineError a call throws, as (code, message).
template <typename F>
std::pair<int, std::string> engine_error(F call) {
  try {
    call();
  } catch (const te::EngineError& e) {
    return {e.code(), e.what()};
  }
  ADD_FAILURE() << "no EngineError was thrown";
  return {0, ""};
}

TEST(FeedbackStore, SaveAndLoadRoundTripBitForBit) {
  te::ErrorFeedbackStore a;
  fill(a, "grad/w", {0.5f, -0.0f, std::numeric_limits<float>::denorm_min()});
  fill(a, "grad/b", {3.0f});
  fill(a, "other", {7.0f, 8.0f});
  const std::vector<std::byte> blob = save(a, "");
  const te::FeedbackBlob parsed = te::parse_feedback_blob(blob);
  ASSERT_EQ(parsed.entries.size(), 3u);
  EXPECT_EQ(parsed.entries[0].first, "grad/b");  // sorted by name
  EXPECT_EQ(parsed.entries[1].first, "grad/w");
  EXPECT_EQ(parsed.entries[2].first, "other");

  te::ErrorFeedbackStore b;
  fill(b, "stale", {1.0f});
  b.load("", 0, 2, blob);
  EXPECT_EQ(b.size(), 3u);
  EXPECT_FALSE(b.contains("stale"));  // under the prefix "" and not in the blob: dropped
  EXPECT_TRUE(same_bits(values(b, "grad/w", 3), values(a, "grad/w", 3)));
  EXPECT_TRUE(same_bits(values(b, "grad/b", 1), {3.0f}));
  EXPECT_TRUE(same_bits(values(b, "other", 2), {7.0f, 8.0f}));
  EXPECT_EQ(save(b, ""), blob);
}

TEST(FeedbackStore, SaveWritesNothingWhenTheBufferIsTooSmall) {
  te::ErrorFeedbackStore store;
  fill(store, "w", {1.0f, 2.0f});
  const size_t needed = store.save("", 0, 1, {});
  EXPECT_EQ(needed, 24u + 4 + 1 + 8 + 8);
  std::vector<std::byte> small(needed - 1, std::byte{0xAB});
  EXPECT_EQ(store.save("", 0, 1, small), needed);
  for (std::byte b : small) ASSERT_EQ(b, std::byte{0xAB});
  std::vector<std::byte> roomy(needed + 10, std::byte{0xAB});
  EXPECT_EQ(store.save("", 0, 1, roomy), needed);
  EXPECT_EQ(static_cast<char>(roomy[0]), '3');
  EXPECT_EQ(roomy[needed], std::byte{0xAB});  // nothing past the blob
}

TEST(FeedbackStore, PrefixesSelectWhatIsSavedAndReplaced) {
  te::ErrorFeedbackStore a;
  fill(a, "a/x", {1.0f});
  fill(a, "a/y", {2.0f, 2.5f});
  fill(a, "b/z", {3.0f});
  const te::FeedbackBlob only_a = te::parse_feedback_blob(save(a, "a/"));
  ASSERT_EQ(only_a.entries.size(), 2u);
  EXPECT_EQ(only_a.entries[0].first, "a/x");
  EXPECT_EQ(only_a.entries[1].first, "a/y");
  EXPECT_TRUE(te::parse_feedback_blob(save(a, "c/")).entries.empty());

  te::ErrorFeedbackStore b;
  fill(b, "a/old", {9.0f});      // under the prefix, not in the blob: dropped
  fill(b, "a/x", {5.0f, 6.0f});  // replaced, with the blob's element count
  fill(b, "b/z", {4.0f});        // outside the prefix: kept
  b.load("a/", 0, 2, save(a, "a/"));
  EXPECT_FALSE(b.contains("a/old"));
  EXPECT_TRUE(same_bits(values(b, "a/x", 1), {1.0f}));
  EXPECT_TRUE(same_bits(values(b, "a/y", 2), {2.0f, 2.5f}));
  EXPECT_TRUE(same_bits(values(b, "b/z", 1), {4.0f}));
  EXPECT_EQ(b.size(), 3u);

  // A blob with a name outside the prefix is refused, naming it and the prefix.
  const auto [code, message] = engine_error([&] { b.load("b/", 0, 2, save(a, "")); });
  EXPECT_EQ(code, THREELC_EINVAL);
  EXPECT_TRUE(contains(message, "'a/x'")) << message;
  EXPECT_TRUE(contains(message, "prefix 'b/'")) << message;
  EXPECT_TRUE(same_bits(values(b, "b/z", 1), {4.0f}));
}

TEST(FeedbackStore, ABlobOfAnotherRankOrJobSizeIsRefusedNamingBoth) {
  te::ErrorFeedbackStore a;
  fill(a, "w", {1.0f});
  const std::vector<std::byte> of_rank1 = save(a, "", 1, 2);
  te::ErrorFeedbackStore b;
  fill(b, "w", {5.0f});
  auto [code, message] = engine_error([&] { b.load("", 0, 2, of_rank1); });
  EXPECT_EQ(code, THREELC_EINVAL);
  EXPECT_TRUE(contains(message, "saved by rank 1 of a job of 2 ranks")) << message;
  EXPECT_TRUE(contains(message, "this is rank 0 of 2")) << message;
  std::tie(code, message) = engine_error([&] { b.load("", 1, 3, of_rank1); });
  EXPECT_EQ(code, THREELC_EINVAL);
  EXPECT_TRUE(contains(message, "this is rank 1 of 3")) << message;
  EXPECT_TRUE(same_bits(values(b, "w", 1), {5.0f}));
  ASSERT_NO_THROW(b.load("", 1, 2, of_rank1));
  EXPECT_TRUE(same_bits(values(b, "w", 1), {1.0f}));
}

TEST(FeedbackStore, AMalformedBlobChangesNothing) {
  te::ErrorFeedbackStore a;
  fill(a, "w", {1.0f, 2.0f});
  std::vector<std::byte> blob = save(a, "");
  blob.pop_back();
  te::ErrorFeedbackStore b;
  fill(b, "w", {5.0f, 6.0f});
  fill(b, "v", {7.0f});
  const auto [code, message] = engine_error([&] { b.load("", 0, 2, blob); });
  EXPECT_EQ(code, THREELC_EMALFORMED);
  EXPECT_TRUE(contains(message, "entry 0 ('w')'s element count 2 needs 8 bytes, 7 left"))
      << message;
  EXPECT_TRUE(contains(message, "offset 29")) << message;
  EXPECT_EQ(b.size(), 2u);
  EXPECT_TRUE(same_bits(values(b, "w", 2), {5.0f, 6.0f}));
  EXPECT_TRUE(same_bits(values(b, "v", 1), {7.0f}));
}

TEST(FeedbackStore, NamesTheBlobCannotHoldAreRefusedUnlessLeftOut) {
  te::ErrorFeedbackStore store;
  fill(store, "ok/w", {1.0f});
  fill(store, "long/" + std::string(5000, 'x'), {1.0f});
  const auto [code, message] = engine_error([&] { store.save("", 0, 1, {}); });
  EXPECT_EQ(code, THREELC_EINVAL);
  EXPECT_TRUE(contains(message, "'long/xxx")) << message;
  EXPECT_TRUE(contains(message, "5005 bytes, more than 4096")) << message;
  EXPECT_EQ(te::parse_feedback_blob(save(store, "ok/", 0, 1)).entries.size(), 1u);
}

TEST(FeedbackStore, AFailedCollectiveLeavesTheResidualsRefused) {
  te::ErrorFeedbackStore store;
  fill(store, "w", {1.0f});
  const std::vector<std::byte> blob = save(store, "");
  {
    te::ErrorFeedbackStore::Update update(store);
    store.get("w", 1)[0] = 2.0f;
    update.done();
  }
  EXPECT_TRUE(same_bits(te::parse_feedback_blob(save(store, "")).entries[0].second, {2.0f}));
  {
    te::ErrorFeedbackStore::Update update(store);  // the collective throws before done()
    store.get("w", 1)[0] = 3.0f;
  }
  auto [code, message] = engine_error([&] { store.save("", 0, 2, {}); });
  EXPECT_EQ(code, THREELC_EPEER);
  EXPECT_TRUE(contains(message, "incomplete")) << message;
  std::tie(code, message) = engine_error([&] { store.load("", 0, 2, blob); });
  EXPECT_EQ(code, THREELC_EPEER);
  EXPECT_TRUE(same_bits(values(store, "w", 1), {3.0f}));
}

TEST(FeedbackStore, ASaveWaitsForTheCollectiveInProgress) {
  // The background thread's collective writes half the residual, pauses, writes the rest; a save
  // started meanwhile must see all of it or none of it (here: all, since it starts after).
  te::ErrorFeedbackStore store;
  const size_t n = 1000;
  fill(store, "w", std::vector<float>(n, 1.0f));
  std::atomic<bool> holding{false};
  std::thread collective([&] {
    te::ErrorFeedbackStore::Update update(store);
    holding = true;
    const std::span<float> e = store.get("w", n);
    std::fill(e.begin(), e.begin() + n / 2, 2.0f);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    std::fill(e.begin() + n / 2, e.end(), 2.0f);
    update.done();
  });
  while (!holding) std::this_thread::yield();
  const auto started = std::chrono::steady_clock::now();
  const std::vector<std::byte> blob = save(store, "");
  const auto waited = std::chrono::steady_clock::now() - started;
  collective.join();
  EXPECT_GE(waited, std::chrono::milliseconds(100));
  EXPECT_TRUE(
      same_bits(te::parse_feedback_blob(blob).entries[0].second, std::vector<float>(n, 2.0f)));
}

}  // namespace
