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
// A wait query (empty payload): "what are you waiting for?", which the peer's I/O thread
// answers with a wait answer (payload: kWaitAnswerBytes, encode_wait_answer). Callers cannot
// use these tags either: every tag from kFirstReservedTag up is the transport's.
inline constexpr uint32_t kWaitQueryTag = 0xFFFFFFFE;
inline constexpr uint32_t kWaitAnswerTag = 0xFFFFFFFD;
inline constexpr uint32_t kFirstReservedTag = kWaitAnswerTag;
inline constexpr size_t kWaitAnswerBytes = 8;

// A rank's answer to a peer's wait query: the peer whose transfer its longest current wait
// (Request::wait) is for, and for how long; peer -1 when it waits for none.
struct WaitAnswer {
  int peer = -1;
  uint32_t waited_ms = 0;
};

struct FrameHeader {
  uint32_t tag = 0;
  uint64_t length = 0;
};

using FrameHeaderBytes = std::array<std::byte, kFrameHeaderBytes>;

FrameHeaderBytes encode_frame_header(uint32_t tag, uint64_t length);

// A wait answer's payload: peer i32, waited_ms u32, little-endian.
using WaitAnswerBytes = std::array<std::byte, kWaitAnswerBytes>;
WaitAnswerBytes encode_wait_answer(const WaitAnswer& answer);
// Parses a wait answer's payload; an empty string, else what is wrong (its length).
std::string parse_wait_answer(std::span<const std::byte> bytes, WaitAnswer& out);

// Parses `bytes` (exactly kFrameHeaderBytes, else an error) into `out`. Returns an empty
// string on success, else what is wrong (bad magic, length over `max_length`, short header).
std::string parse_frame_header(std::span<const std::byte> bytes, uint64_t max_length,
                               FrameHeader& out);

}  // namespace threelc::transport::detail
