// The CUDA codec's stand-in in a build without nvcc (THREELC_HAVE_CUDA off): every call fails
// with a Status that says why, and device_count() is 0.
#include <string>

#include "threelc/compression/cuda_codec.h"

namespace threelc::compression::cuda {
namespace {

const char* const kNotBuilt =
    "CUDA codec: this build of threelc has no CUDA support (CMake found no nvcc; install the "
    "CUDA Toolkit or set CUDACXX and rebuild)";

Status not_built() { return Status::failure(kNotBuilt); }

}  // namespace

struct Workspace::Impl {};

Workspace::Workspace(size_t /*max_count*/) : impl_(std::make_unique<Impl>()) {}
Workspace::~Workspace() = default;

bool built() { return false; }

int device_count(std::string* why_none) {
  if (why_none != nullptr) *why_none = kNotBuilt;
  return 0;
}

Status encode_to_host(const DeviceValues&, float*, const EncodeOptions&, Workspace&, Stream,
                      std::span<uint8_t>, EncodedBlock*) {
  return not_built();
}

Status encode_on_device(const DeviceValues&, float*, const EncodeOptions&, Workspace&, Stream,
                        uint8_t*, size_t, EncodedBlock*) {
  return not_built();
}

Status decode_from_host(std::span<const uint8_t>, size_t, float*, Workspace&, Stream) {
  return not_built();
}

Status decode_add_from_host(std::span<const uint8_t>, size_t, float, float*, Workspace&, Stream) {
  return not_built();
}

Status decode_on_device(const uint8_t*, const BlockInfo&, float*, Workspace&, Stream) {
  return not_built();
}

Status decode_add_on_device(const uint8_t*, const BlockInfo&, float, float*, Workspace&, Stream) {
  return not_built();
}

}  // namespace threelc::compression::cuda
