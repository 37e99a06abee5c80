// Where a fused allreduce's values live, and the steps on them that depend on it. The
// allreduce itself (fused_allreduce.cc) runs the same steps for host and CUDA tensors; every
// touch of the values goes through a ValueSpace: the fusion buffer, widening to fp32 and
// narrowing back, zeroing, scaling and averaging, the residuals of error feedback, the codec of
// 3LC blocks, and the exchange inside a host for THREELC_HIERARCHICAL. HostValues
// (host_values.h) is host memory; gpu/device_values.h one CUDA device's, on its stream.
#pragma once

#include <cstddef>
#include <string>

#include "collectives/block_codec.h"
#include "collectives/hierarchical.h"
#include "collectives/observer.h"
#include "element_type.h"

namespace threelc::engine {

class ValueSpace {
 public:
  virtual ~ValueSpace() = default;

  // Encodes and decodes 3LC blocks of these values (blocks are in host memory).
  virtual BlockCodec& codec() = 0;
  // The fusion buffer, at least `bytes` long, kept across collectives (contents unspecified).
  virtual std::byte* fusion_buffer(size_t bytes) = 0;
  // The length a buffer of `count` values is padded to for a hierarchical exchange among
  // `parts` local ranks (`count` where the exchange takes segments of unequal length).
  virtual size_t padded(size_t count, size_t parts) const = 0;
  // dst[0..count) of type `to` = src[0..count) of type `from`: a copy when the types are the
  // same (nothing when dst is src), else widening to fp32 or narrowing from it.
  virtual void convert(ElementType from, const void* src, ElementType to, void* dst,
                       size_t count) = 0;
  // count zero values of type fp32 at dst.
  virtual void zero(float* dst, size_t count) = 0;
  // values[i] *= factor; values[i] /= divisor, in the precision of `type`.
  virtual void scale(ElementType type, void* values, size_t count, double factor) = 0;
  virtual void divide(ElementType type, void* values, size_t count, int divisor) = 0;
  // The error-feedback residual of `name`, `count` values in this space, zero on first use.
  // The caller holds the ErrorFeedbackStore's Update for the collective (error_feedback.h).
  virtual float* residual(const std::string& name, size_t count) = 0;
  // The exchange among this host's ranks for THREELC_HIERARCHICAL, recording into `observer`,
  // or nullptr where these values cannot take part in one (the allreduce then runs flat).
  virtual LocalExchange* local_exchange(CollectiveObserver* observer) = 0;
  // Returns once every step issued on the values has finished (results are in the outputs).
  virtual void finish() = 0;
};

}  // namespace threelc::engine
