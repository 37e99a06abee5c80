// TcpPair: the data path of one connected socket (framed sends in order, receives matched by tag,
// early messages staged). Callback-driven on the I/O thread; send/recv/start/close post to it.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "frame.h"
#include "request.h"
#include "tcp_socket.h"
#include "threelc/transport/transport.h"

namespace threelc::transport::detail {

class TcpPair final : public Pair, public std::enable_shared_from_this<TcpPair> {
 public:
  TcpPair(tcp::socket socket, int self, int peer, bool control, const Options& options);

  int peer() const override { return peer_; }
  Request send(uint32_t tag, std::span<const std::byte> bytes) override;
  Request recv(uint32_t tag, std::span<std::byte> into) override;

  // Starts the read loop (on the I/O thread).
  void start();
  // Fails every request and closes the socket (I/O thread only).
  void fail(const std::string& message);
  // Thread-safe close for the context's shutdown.
  void close_from_any_thread(const std::string& message);

 private:
  struct SendOp {
    FrameHeaderBytes header;
    std::span<const std::byte> bytes;
    std::shared_ptr<RequestState> state;
  };
  struct RecvOp {
    std::span<std::byte> into;
    std::shared_ptr<RequestState> state;
  };
  struct Staged {
    std::vector<std::byte> data;
    bool complete = false;
    std::optional<RecvOp> waiter;  // a receive matched while the payload was still arriving
  };

  std::string peer_name() const;
  std::shared_ptr<RequestState> make_state(std::string what);
  std::string prefix() const { return "threelc rank " + std::to_string(self_) + ": "; }
  void on_error(const error_code& ec, const char* doing);
  void write_next();
  void post_recv(uint32_t tag, RecvOp op);
  void deliver(const Staged& staged, RecvOp& op);
  void too_long(RecvOp& op, uint64_t length);
  void read_header();
  void on_header();
  // Reads the payload into a staging buffer (`keep`: queue it for a later receive).
  void stage(const FrameHeader& header, bool keep);
  void staged_done(const std::shared_ptr<Staged>& staged);

  tcp::socket socket_;
  const int self_;
  const int peer_;
  const bool control_;
  const uint64_t max_bytes_;
  const std::chrono::milliseconds timeout_;
  const std::string name_;

  std::string failed_;  // non-empty once the connection is gone
  std::deque<SendOp> sendq_;
  bool writing_ = false;
  FrameHeaderBytes header_{};
  std::unordered_map<uint32_t, std::deque<RecvOp>> posted_;
  std::unordered_map<uint32_t, std::deque<std::shared_ptr<Staged>>> staged_;
  std::shared_ptr<Staged> reading_;  // the staged message whose payload is arriving
};

}  // namespace threelc::transport::detail
