#include "feedback_blob.h"

#include <bit>
#include <cstring>

namespace threelc::engine {

namespace {

// The blob is little-endian and written with memcpy, as every other threelc format is.
static_assert(std::endian::native == std::endian::little, "threelc assumes a little-endian host");

constexpr char kMagic[4] = {'3', 'L', 'C', 'F'};
// The smallest entry: name length, one name byte, element count.
constexpr size_t kMinEntryBytes = 4 + 1 + 8;

// The length of the UTF-8 sequence starting at text[i], or 0 when none starts there (an
// overlong form, a surrogate, a code point above U+10FFFF or a cut sequence included).
size_t utf8_sequence(std::string_view text, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char b0 = byte(i);
  if (b0 < 0x80) return 1;
  size_t length = 0;
  unsigned char lo = 0x80;  // bounds of the second byte (the first continuation)
  unsigned char hi = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    length = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    length = 3;
    if (b0 == 0xE0) lo = 0xA0;  // overlong
    if (b0 == 0xED) hi = 0x9F;  // surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    length = 4;
    if (b0 == 0xF0) lo = 0x90;  // overlong
    if (b0 == 0xF4) hi = 0x8F;  // above U+10FFFF
  } else {
    return 0;
  }
  if (text.size() - i < length) return 0;
  if (byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  for (size_t k = 2; k < length; ++k) {
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
  }
  return length;
}

// A name for a message: cut after 80 bytes (at a character boundary) so a message stays short.
std::string shown(std::string_view name) {
  constexpr size_t kShown = 80;
  std::string out(1, '\'');
  if (name.size() <= kShown) return out.append(name).append(1, '\'');
  size_t cut = 0;
  while (cut < kShown) {
    const size_t n = utf8_sequence(name, cut);
    cut += n == 0 ? 1 : n;
  }
  return out.append(name.substr(0, cut))
      .append("...' (")
      .append(std::to_string(name.size()))
      .append(" bytes)");
}

class BlobReader {
 public:
  explicit BlobReader(std::span<const std::byte> bytes) : bytes_(bytes) {}

  size_t offset() const { return at_; }
  size_t left() const { return bytes_.size() - at_; }

  uint32_t u32(const std::string& field) { return get<uint32_t>(field); }
  uint64_t u64(const std::string& field) { return get<uint64_t>(field); }
  std::span<const std::byte> take(size_t n, const std::string& field) {
    need(n, field);
    const std::span<const std::byte> out = bytes_.subspan(at_, n);
    at_ += n;
    return out;
  }

  [[noreturn]] void fail(size_t at, const std::string& what) const {
    throw FeedbackBlobError("feedback blob: " + what + " (offset " + std::to_string(at) + " of " +
                            std::to_string(bytes_.size()) + " bytes)");
  }

 private:
  void need(size_t n, const std::string& field) const {
    if (left() < n) {
      fail(at_, "truncated in " + field + ": it needs " + std::to_string(n) + " bytes, " +
                    std::to_string(left()) + " left");
    }
  }
  template <typename T>
  T get(const std::string& field) {
    need(sizeof(T), field);
    T v;
    std::memcpy(&v, bytes_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return v;
  }

  std::span<const std::byte> bytes_;
  size_t at_ = 0;
};

class BlobWriter {
 public:
  explicit BlobWriter(std::span<std::byte> out) : out_(out) {}
  void put(const void* p, size_t n) {
    if (n == 0) return;
    std::memcpy(out_.data() + at_, p, n);
    at_ += n;
  }
  void u32(uint32_t v) { put(&v, sizeof v); }
  void u64(uint64_t v) { put(&v, sizeof v); }
  size_t offset() const { return at_; }

 private:
  std::span<std::byte> out_;
  size_t at_ = 0;
};

}  // namespace

std::string feedback_name_problem(std::string_view name) {
  if (name.empty()) return "is empty";
  if (name.size() > kFeedbackNameMaxBytes) {
    return "is " + std::to_string(name.size()) + " bytes, more than " +
           std::to_string(kFeedbackNameMaxBytes);
  }
  for (size_t i = 0; i < name.size();) {
    if (name[i] == '\0') return "contains a NUL byte at byte " + std::to_string(i);
    const size_t n = utf8_sequence(name, i);
    if (n == 0) return "is not valid UTF-8 at byte " + std::to_string(i);
    i += n;
  }
  return "";
}

size_t feedback_blob_size(std::span<const FeedbackEntryView> entries) {
  size_t bytes = kFeedbackBlobHeaderBytes;
  for (const FeedbackEntryView& e : entries) {
    bytes += 4 + e.name.size() + 8 + e.values.size() * sizeof(float);
  }
  return bytes;
}

void write_feedback_blob(uint32_t rank, uint32_t size, std::span<const FeedbackEntryView> entries,
                         std::span<std::byte> out) {
  if (out.size() != feedback_blob_size(entries)) {
    throw std::invalid_argument("write_feedback_blob: the buffer holds " +
                                std::to_string(out.size()) + " bytes, the blob " +
                                std::to_string(feedback_blob_size(entries)));
  }
  BlobWriter w(out);
  w.put(kMagic, sizeof kMagic);
  w.u32(kFeedbackBlobVersion);
  w.u32(rank);
  w.u32(size);
  w.u64(entries.size());
  for (const FeedbackEntryView& e : entries) {
    w.u32(static_cast<uint32_t>(e.name.size()));
    w.put(e.name.data(), e.name.size());
    w.u64(e.values.size());
    w.put(e.values.data(), e.values.size() * sizeof(float));
  }
}

FeedbackBlob parse_feedback_blob(std::span<const std::byte> bytes) {
  BlobReader r(bytes);
  FeedbackBlob blob;
  const std::span<const std::byte> magic = r.take(sizeof kMagic, "the magic");
  if (std::memcmp(magic.data(), kMagic, sizeof kMagic) != 0) {
    r.fail(0, "the magic is not \"3LCF\": this is not a threelc feedback blob");
  }
  const uint32_t version = r.u32("the version");
  if (version != kFeedbackBlobVersion) {
    r.fail(4, "version " + std::to_string(version) + " is not supported (this library reads " +
                  std::to_string(kFeedbackBlobVersion) + ")");
  }
  blob.rank = r.u32("the rank");
  blob.size = r.u32("the size");
  if (blob.rank >= blob.size) {
    r.fail(8,
           "rank " + std::to_string(blob.rank) + " is not below size " + std::to_string(blob.size));
  }
  const size_t count_at = r.offset();
  const uint64_t count = r.u64("the entry count");
  if (count > r.left() / kMinEntryBytes) {
    r.fail(count_at, "the entry count " + std::to_string(count) + " cannot fit: the " +
                         std::to_string(r.left()) + " bytes after the header hold at most " +
                         std::to_string(r.left() / kMinEntryBytes) + " entries");
  }
  blob.entries.reserve(count);
  for (uint64_t i = 0; i < count; ++i) {
    const std::string entry = "entry " + std::to_string(i);
    const size_t length_at = r.offset();
    const uint32_t length = r.u32(entry + "'s name length");
    if (length == 0 || length > kFeedbackNameMaxBytes) {
      r.fail(length_at, entry + "'s name length is " + std::to_string(length) + ", outside 1.." +
                            std::to_string(kFeedbackNameMaxBytes));
    }
    const size_t name_at = r.offset();
    const std::span<const std::byte> raw = r.take(length, entry + "'s name");
    std::string name(reinterpret_cast<const char*>(raw.data()), raw.size());
    const std::string problem = feedback_name_problem(name);
    if (!problem.empty()) r.fail(name_at, std::string(entry).append("'s name ").append(problem));
    if (!blob.entries.empty()) {
      const std::string& before = blob.entries.back().first;
      if (name == before) {
        r.fail(name_at, entry + "'s name " + shown(name) + " repeats entry " +
                            std::to_string(i - 1) + "'s (duplicate name)");
      }
      if (name < before) {
        r.fail(name_at, entry + "'s name " + shown(name) + " sorts before entry " +
                            std::to_string(i - 1) + "'s " + shown(before) +
                            " (names must be in increasing byte order)");
      }
    }
    const size_t count_field_at = r.offset();
    const uint64_t elements = r.u64(entry + " (" + shown(name) + ")'s element count");
    if (elements > r.left() / sizeof(float)) {
      r.fail(count_field_at, entry + " (" + shown(name) + ")'s element count " +
                                 std::to_string(elements) + " needs " +
                                 (elements > SIZE_MAX / sizeof(float)
                                      ? std::string("more bytes than exist")
                                      : std::to_string(elements * sizeof(float)) + " bytes") +
                                 ", " + std::to_string(r.left()) + " left");
    }
    const std::span<const std::byte> values =
        r.take(static_cast<size_t>(elements) * sizeof(float), entry + "'s values");
    std::vector<float> residual(static_cast<size_t>(elements));
    if (!values.empty()) std::memcpy(residual.data(), values.data(), values.size());
    blob.entries.emplace_back(std::move(name), std::move(residual));
  }
  if (r.left() != 0) {
    r.fail(r.offset(), std::to_string(r.left()) +
                           (r.left() == 1 ? " trailing byte" : " trailing bytes") +
                           " after the last entry");
  }
  return blob;
}

}  // namespace threelc::engine
