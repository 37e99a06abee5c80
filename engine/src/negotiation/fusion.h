// Tensor fusion: the coordinator merges ready allreduces that can share one buffer (same dtype,
// op, scaling, compression, device and process set) into one response of at most `threshold` bytes,
// so that many small gradients travel as a few large messages.
#pragma once

#include <cstddef>
#include <vector>

#include "negotiation/messages.h"

namespace threelc::engine {

// Bytes a tensor occupies in a fusion buffer: fp32 when compressed (3LC works on fp32), its
// own dtype otherwise.
size_t fused_bytes(const OpRequest& request);

// Merges the allreduce kRun responses of `ready` (each with one tensor) into groups of at most
// `threshold` bytes (0: no fusion); a group sits where its first tensor was. Other responses
// keep their place.
std::vector<Response> fuse(std::vector<Response> ready, size_t threshold);

}  // namespace threelc::engine
