// The TCP transport's entry point, used by connect() in transport.cc.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "request.h"
#include "threelc/transport/transport.h"

namespace threelc::transport::detail {

// Which channels a TcpContext opens.
enum class TcpChannels {
  kAll,          // control and data: THREELC_TRANSPORT=tcp
  kControlOnly,  // the rendezvous and the control channels only: the bootstrap of another
                 // transport that carries the data itself (UCX); its pair() throws
};

// Who else hears of a peer's stop notice that arrives on a TcpContext's channels: the transport
// that carries the data itself (UCX), which must fail its own channels too. Set late (the
// listener exists only once the rendezvous is over), cleared before the listener goes.
class StopListener {
 public:
  using Handler = std::function<void(int peer, const std::string& reason)>;
  void set(Handler handler) {
    std::lock_guard lock(mutex_);
    handler_ = std::move(handler);
  }
  void operator()(int peer, const std::string& reason) {
    std::lock_guard lock(mutex_);
    if (handler_) handler_(peer, reason);
  }

 private:
  std::mutex mutex_;
  Handler handler_;
};

// What a TcpContext shares with the transport that carries the data (UCX).
struct TcpContextLinks {
  std::shared_ptr<WaitRegistry> waits;      // this rank's waits (null: a registry of its own)
  std::shared_ptr<StopListener> on_notice;  // may be null
};

// The TCP implementation of connect() (tcp_context.cc).
std::unique_ptr<Context> connect_tcp(const Options& options,
                                     TcpChannels channels = TcpChannels::kAll,
                                     TcpContextLinks links = {});

}  // namespace threelc::transport::detail
