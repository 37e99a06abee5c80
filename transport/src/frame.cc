#include "frame.h"

#include <cstdio>

namespace threelc::transport::detail {
namespace {

void put_le(std::byte* out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out[i] = static_cast<std::byte>((value >> (8 * i)) & 0xFF);
}

uint64_t get_le(const std::byte* in, int bytes) {
  uint64_t value = 0;
  for (int i = 0; i < bytes; ++i) value |= static_cast<uint64_t>(in[i]) << (8 * i);
  return value;
}

}  // namespace

FrameHeaderBytes encode_frame_header(uint32_t tag, uint64_t length) {
  FrameHeaderBytes out{};
  put_le(out.data(), kFrameMagic, 4);
  put_le(out.data() + 4, tag, 4);
  put_le(out.data() + 8, length, 8);
  return out;
}

std::string parse_frame_header(std::span<const std::byte> bytes, uint64_t max_length,
                               FrameHeader& out) {
  char text[160];
  if (bytes.size() != kFrameHeaderBytes) {
    std::snprintf(text, sizeof text, "frame header of %zu bytes (expected %zu)", bytes.size(),
                  kFrameHeaderBytes);
    return text;
  }
  const auto magic = static_cast<uint32_t>(get_le(bytes.data(), 4));
  if (magic != kFrameMagic) {
    std::snprintf(text, sizeof text, "bad frame magic 0x%08x (expected 0x%08x)", magic,
                  kFrameMagic);
    return text;
  }
  const uint64_t length = get_le(bytes.data() + 8, 8);
  if (length > max_length) {
    std::snprintf(text, sizeof text, "frame length %llu exceeds the limit of %llu bytes",
                  static_cast<unsigned long long>(length),
                  static_cast<unsigned long long>(max_length));
    return text;
  }
  out.tag = static_cast<uint32_t>(get_le(bytes.data() + 4, 4));
  out.length = length;
  return {};
}

WaitAnswerBytes encode_wait_answer(const WaitAnswer& answer) {
  WaitAnswerBytes out{};
  put_le(out.data(), static_cast<uint32_t>(answer.peer), 4);
  put_le(out.data() + 4, answer.waited_ms, 4);
  return out;
}

std::string parse_wait_answer(std::span<const std::byte> bytes, WaitAnswer& out) {
  if (bytes.size() != kWaitAnswerBytes) {
    return "a wait answer of " + std::to_string(bytes.size()) + " bytes (expected " +
           std::to_string(kWaitAnswerBytes) + ")";
  }
  out.peer = static_cast<int32_t>(static_cast<uint32_t>(get_le(bytes.data(), 4)));
  out.waited_ms = static_cast<uint32_t>(get_le(bytes.data() + 4, 4));
  return {};
}

}  // namespace threelc::transport::detail
