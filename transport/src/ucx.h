// The UCX transport's entry point, used by connect() in transport.cc when the build has UCX
// (THREELC_HAVE_UCX).
#pragma once

#include <memory>

#include "threelc/transport/transport.h"

namespace threelc::transport::detail {

// THREELC_TRANSPORT=ucx (ucx_context.cc): the TCP rendezvous and control channels, data
// channels over UCX.
std::unique_ptr<Context> connect_ucx(const Options& options);

}  // namespace threelc::transport::detail
