// The error-feedback blob of threelc_feedback_save / threelc_feedback_load: one rank's residuals
// (name -> fp32 values) as bytes, laid out in docs/WIRE_FORMAT.md ("Error-feedback blob"). The
// format only: no store, no locking, no engine state.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine_error.h"

namespace threelc::engine {

inline constexpr uint32_t kFeedbackBlobVersion = 1;
inline constexpr size_t kFeedbackBlobHeaderBytes = 24;  // magic, version, rank, size, count
inline constexpr size_t kFeedbackNameMaxBytes = 4096;

// A blob that is not one: the message names the field and its byte offset.
class FeedbackBlobError : public EngineError {
 public:
  explicit FeedbackBlobError(const std::string& message)
      : EngineError(THREELC_EMALFORMED, message) {}
};

// One residual buffer as the writer sees it (the store's memory, not copied).
struct FeedbackEntryView {
  std::string_view name;
  std::span<const float> values;
};

// A parsed blob; entries in strictly increasing byte order of their names.
struct FeedbackBlob {
  uint32_t rank = 0;
  uint32_t size = 0;
  std::vector<std::pair<std::string, std::vector<float>>> entries;
};

// What keeps `name` out of a blob ("is empty", "is 5000 bytes, more than 4096", "contains a NUL
// byte", "is not valid UTF-8"), or "" when it can be written.
std::string feedback_name_problem(std::string_view name);

// Bytes of the blob holding `entries`.
size_t feedback_blob_size(std::span<const FeedbackEntryView> entries);

// Writes the blob of `entries` (sorted by name, every name without a problem) into `out`, which
// holds exactly feedback_blob_size(entries) bytes.
void write_feedback_blob(uint32_t rank, uint32_t size, std::span<const FeedbackEntryView> entries,
                         std::span<std::byte> out);

// Parses `bytes`, checking every field before believing it (magic, version, each name's length,
// bytes and order, each count against the bytes left, no trailing bytes). Throws
// FeedbackBlobError naming the field and its offset; never reads outside `bytes`.
FeedbackBlob parse_feedback_blob(std::span<const std::byte> bytes);

}  // namespace threelc::engine
