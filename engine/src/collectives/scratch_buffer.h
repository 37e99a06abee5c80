// A buffer for bytes that are always written before they are read (receive and encode
// buffers). Unlike std::vector it does not zero-fill when it grows: a push_pull call posts
// hundreds of worst-case-sized receives of which 3LC blocks touch a few percent, and zero-filling
// them cost more than the codec itself (docs/BENCHMARKS.md, "Allreduce vs gloo").
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>

namespace threelc::engine {

template <typename T>
class ScratchBuffer {
 public:
  // Makes size() == n; the contents are unspecified after growing.
  void resize(size_t n) {
    if (n > capacity_) {
      data_ = std::make_unique_for_overwrite<T[]>(n);
      capacity_ = n;
    }
    size_ = n;
  }
  void release() {
    data_.reset();
    size_ = capacity_ = 0;
  }
  T* data() { return data_.get(); }
  const T* data() const { return data_.get(); }
  size_t size() const { return size_; }
  T* begin() { return data(); }
  T* end() { return data() + size_; }
  const T* begin() const { return data(); }
  const T* end() const { return data() + size_; }

 private:
  std::unique_ptr<T[]> data_;
  size_t size_ = 0;
  size_t capacity_ = 0;
};

// Staging buffers kept from one call to the next, so a collective that stages tens of megabytes
// does not fault them in anew every call (page faults dominated the raw allreduce without it;
// docs/BENCHMARKS.md). The engine keeps one per executor; collectives take it optionally.
class Workspace {
 public:
  // The index-th staging buffer, sized to n bytes (contents unspecified).
  ScratchBuffer<std::byte>& staging(size_t index, size_t n) {
    if (staging_.size() <= index) staging_.resize(index + 1);
    staging_[index].resize(n);
    return staging_[index];
  }
  // The index-th message buffer (an encoded block sent or received), sized to n bytes. A 3LC
  // block touches only its first pages, so keeping worst-case-sized buffers costs little memory.
  ScratchBuffer<uint8_t>& message(size_t index, size_t n) {
    if (messages_.size() <= index) messages_.resize(index + 1);
    messages_[index].resize(n);
    return messages_[index];
  }

 private:
  // Deques: growing them keeps references to the buffers already handed out valid.
  std::deque<ScratchBuffer<std::byte>> staging_;
  std::deque<ScratchBuffer<uint8_t>> messages_;
};

}  // namespace threelc::engine
