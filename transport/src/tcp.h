// The TCP transport's entry point, used by connect() in transport.cc.
#pragma once

#include <memory>

#include "threelc/transport/transport.h"

namespace threelc::transport::detail {

// The TCP implementation of connect() (tcp_context.cc).
std::unique_ptr<Context> connect_tcp(const Options& options);

}  // namespace threelc::transport::detail
