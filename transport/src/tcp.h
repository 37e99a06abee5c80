// The TCP transport's entry point, used by connect() in transport.cc.
#pragma once

#include <memory>

#include "threelc/transport/transport.h"

namespace threelc::transport::detail {

// Which channels a TcpContext opens.
enum class TcpChannels {
  kAll,          // control and data: THREELC_TRANSPORT=tcp
  kControlOnly,  // the rendezvous and the control channels only: the bootstrap of another
                 // transport that carries the data itself (UCX); its pair() throws
};

// The TCP implementation of connect() (tcp_context.cc).
std::unique_ptr<Context> connect_tcp(const Options& options,
                                     TcpChannels channels = TcpChannels::kAll);

}  // namespace threelc::transport::detail
