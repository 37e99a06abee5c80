// Little-endian serialization of negotiation messages. ByteReader checks every read against
// the message's end and throws NegotiationError on truncated or oversized fields.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine_error.h"

namespace threelc::engine {

// A negotiation message that could not be parsed (a protocol violation by the peer), or one
// that did not arrive whole: THREELC_EPEER, naming the peer once it is known.
class NegotiationError : public EngineError {
 public:
  explicit NegotiationError(const std::string& message, int peer = kNoPeer)
      : EngineError(THREELC_EPEER, message, peer) {}
};

class ByteWriter {
 public:
  void u8(uint8_t v) { put(&v, sizeof v); }
  void u32(uint32_t v) { put(&v, sizeof v); }
  void u64(uint64_t v) { put(&v, sizeof v); }
  void i64(int64_t v) { put(&v, sizeof v); }
  void f32(float v) { put(&v, sizeof v); }
  void f64(double v) { put(&v, sizeof v); }
  void str(const std::string& s) {
    u32(static_cast<uint32_t>(s.size()));
    put(s.data(), s.size());
  }
  void i64s(const std::vector<int64_t>& v) {
    u32(static_cast<uint32_t>(v.size()));
    for (int64_t x : v) i64(x);
  }
  void i32s(const std::vector<int32_t>& v) {
    u32(static_cast<uint32_t>(v.size()));
    for (int32_t x : v) u32(static_cast<uint32_t>(x));
  }
  std::vector<std::byte>& bytes() { return bytes_; }

 private:
  void put(const void* p, size_t n) {
    if (n == 0) return;
    const size_t at = bytes_.size();
    bytes_.resize(at + n);
    std::memcpy(bytes_.data() + at, p, n);
  }
  std::vector<std::byte> bytes_;
};

class ByteReader {
 public:
  explicit ByteReader(std::span<const std::byte> bytes) : bytes_(bytes) {}
  uint8_t u8() { return get<uint8_t>(); }
  uint32_t u32() { return get<uint32_t>(); }
  uint64_t u64() { return get<uint64_t>(); }
  int64_t i64() { return get<int64_t>(); }
  float f32() { return get<float>(); }
  double f64() { return get<double>(); }
  std::string str() {
    const size_t n = count(1);
    std::string s(reinterpret_cast<const char*>(bytes_.data() + at_), n);
    at_ += n;
    return s;
  }
  std::vector<int64_t> i64s() {
    std::vector<int64_t> v(count(sizeof(int64_t)));
    for (auto& x : v) x = i64();
    return v;
  }
  std::vector<int32_t> i32s() {
    std::vector<int32_t> v(count(sizeof(int32_t)));
    for (auto& x : v) x = static_cast<int32_t>(u32());
    return v;
  }
  // A u32 element count whose elements (each at least `unit` bytes) fit in what is left.
  size_t count(size_t unit) {
    const size_t n = u32();
    if (n > (bytes_.size() - at_) / unit) throw NegotiationError("negotiation message truncated");
    return n;
  }
  bool at_end() const { return at_ == bytes_.size(); }

 private:
  template <typename T>
  T get() {
    if (bytes_.size() - at_ < sizeof(T)) throw NegotiationError("negotiation message truncated");
    T v;
    std::memcpy(&v, bytes_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return v;
  }
  std::span<const std::byte> bytes_;
  size_t at_ = 0;
};

}  // namespace threelc::engine
