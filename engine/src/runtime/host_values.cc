#include "runtime/host_values.h"

#include <cstring>

#include "collectives/reduce_ops.h"
#include "element_type.h"

namespace threelc::engine {

std::byte* HostValues::fusion_buffer(size_t bytes) {
  if (parts_.fusion.size() < bytes) parts_.fusion.resize(bytes);
  return parts_.fusion.data();
}

void HostValues::convert(ElementType from, const void* src, ElementType to, void* dst,
                         size_t count) {
  if (from == to) {
    if (dst != src && count > 0) std::memcpy(dst, src, count * element_size(from));
  } else if (to == ElementType::kFloat32) {
    to_float32(from, src, static_cast<float*>(dst), count);
  } else {
    from_float32(to, static_cast<const float*>(src), dst, count);
  }
}

LocalExchange* HostValues::local_exchange(CollectiveObserver* observer) {
  if (parts_.local != nullptr) parts_.local->observe(observer);
  return parts_.local;
}

}  // namespace threelc::engine
