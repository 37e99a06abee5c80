// libFuzzer target for the transport's frame header parser (transport/src/frame.cc): any input
// must parse or be rejected with a message, never read out of bounds, and an accepted header
// must respect the length limit and re-encode to the same bytes. The same input, as a wait
// answer's payload (parse_wait_answer), must be accepted only at its length and re-encode too.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "frame.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace d = threelc::transport::detail;
  if (size < 8) return 0;
  // The first 8 bytes choose the limit; the rest is the header (any length).
  uint64_t limit = 0;
  for (int i = 0; i < 8; ++i) limit |= static_cast<uint64_t>(data[i]) << (8 * i);
  limit >>= (data[0] & 63);
  const auto bytes = std::as_bytes(std::span(data + 8, size - 8));
  d::FrameHeader header;
  const auto error = d::parse_frame_header(bytes, limit, header);
  if (error.empty()) {
    if (bytes.size() != d::kFrameHeaderBytes || header.length > limit) std::abort();
    const auto again = d::encode_frame_header(header.tag, header.length);
    for (size_t i = 0; i < again.size(); ++i) {
      if (again[i] != bytes[i]) std::abort();
    }
  }
  d::WaitAnswer answer;
  if (d::parse_wait_answer(bytes, answer).empty()) {
    if (bytes.size() != d::kWaitAnswerBytes) std::abort();
    const auto again = d::encode_wait_answer(answer);
    for (size_t i = 0; i < again.size(); ++i) {
      if (again[i] != bytes[i]) std::abort();
    }
  }
  return 0;
}
