// The scalar kernel set: the reference functions, unvectorized.
#include "kernels.h"
#include "kernels_reference.h"

namespace threelc::compression::detail {

const Kernels& scalar_kernels() {
  using namespace reference;
  static const Kernels kernels = {"scalar",        abs_max_bits, quantize_tile,   zero_run_encode,
                                  zero_run_expand, unpack_tile,  unpack_tile_add, raw_add};
  return kernels;
}

}  // namespace threelc::compression::detail
