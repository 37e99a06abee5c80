// Little-endian Writer and bounds-checked Reader for the handshake and rendezvous payloads
// (u32 integers, fixed byte arrays, length-prefixed text).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

namespace threelc::transport::detail {

struct Writer {
  std::vector<std::byte> bytes;
  void u32(uint32_t v) {
    for (int i = 0; i < 4; ++i) bytes.push_back(static_cast<std::byte>((v >> (8 * i)) & 0xFF));
  }
  void raw(std::span<const std::byte> b) { bytes.insert(bytes.end(), b.begin(), b.end()); }
  void text(const std::string& s) {
    u32(static_cast<uint32_t>(s.size()));
    raw(std::as_bytes(std::span(s.data(), s.size())));
  }
};

// Every read past the end (or text longer than `max`) clears `ok` and returns a zero value.
struct Reader {
  std::span<const std::byte> bytes;
  size_t at = 0;
  bool ok = true;
  uint32_t u32() {
    if (bytes.size() - at < 4) {
      ok = false;
      return 0;
    }
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(bytes[at + i]) << (8 * i);
    at += 4;
    return v;
  }
  template <size_t N>
  std::array<std::byte, N> fixed() {
    std::array<std::byte, N> out{};
    if (bytes.size() - at < N) {
      ok = false;
      return out;
    }
    std::memcpy(out.data(), bytes.data() + at, N);
    at += N;
    return out;
  }
  std::string text(size_t max) {
    const uint32_t n = u32();
    if (!ok || n > max || bytes.size() - at < n) {
      ok = false;
      return {};
    }
    std::string s(reinterpret_cast<const char*>(bytes.data() + at), n);
    at += n;
    return s;
  }
};

}  // namespace threelc::transport::detail
