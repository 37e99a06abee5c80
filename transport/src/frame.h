// The frame header every message on a threelc TCP connection starts with (handshake and data):
//   magic u32 = kFrameMagic, tag u32, length u64 (payload bytes that follow), little-endian.
// parse_frame_header() is the only code that interprets bytes from the wire before the payload
// is read; it is kept free of I/O so that it can be fuzzed (tests/fuzz/frame_fuzzer.cc).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace threelc::transport::detail {

inline constexpr uint32_t kFrameMagic = 0x54434C33;  // "3LCT" in little-endian byte order
inline constexpr size_t kFrameHeaderBytes = 16;
// The tag of a stop notice (docs/WIRE_FORMAT.md): the sender stops, and its payload (at most
// kMaxStopNoticeBytes of text) says why. Callers cannot send or receive with this tag.
inline constexpr uint32_t kStopNoticeTag = 0xFFFFFFFF;
inline constexpr uint64_t kMaxStopNoticeBytes = 4096;

struct FrameHeader {
  uint32_t tag = 0;
  uint64_t length = 0;
};

using FrameHeaderBytes = std::array<std::byte, kFrameHeaderBytes>;

FrameHeaderBytes encode_frame_header(uint32_t tag, uint64_t length);

// Parses `bytes` (exactly kFrameHeaderBytes, else an error) into `out`. Returns an empty
// string on success, else what is wrong (bad magic, length over `max_length`, short header).
std::string parse_frame_header(std::span<const std::byte> bytes, uint64_t max_length,
                               FrameHeader& out);

}  // namespace threelc::transport::detail
