// A buffer for bytes that are always written before they are read (receive and encode
// buffers). Unlike std::vector it does not zero-fill when it grows: a push_pull call posts
// hundreds of worst-case-sized receives of which 3LC blocks touch a few percent, and zero-filling
// them cost more than the codec itself (docs/BENCHMARKS.md, "Allreduce vs gloo").
#pragma once

#include <cstddef>
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

}  // namespace threelc::engine
