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
#include "pair_requests.h"
#include "request.h"
#include "tcp_socket.h"
#include "threelc/transport/transport.h"

namespace threelc::transport::detail {

class TcpPair final : public Pair,
                      public PairRequests<TcpPair>,
                      public std::enable_shared_from_this<TcpPair> {
 public:
  TcpPair(tcp::socket socket, int self, int peer, bool control, const Options& options,
          Links links);

  int peer() const override { return peer_; }
  Request send(uint32_t tag, std::span<const std::byte> bytes) override;
  Request recv(uint32_t tag, std::span<std::byte> into) override;

  // Starts the read loop (on the I/O thread).
  void start();
  // Fails every request and closes the socket (I/O thread only).
  void fail(const std::string& message);
  // Thread-safe close after a wait on this pair gave up with `message`: unless a frame is half
  // written, the peer first gets it as a stop notice (if the socket takes it at once), so that
  // it reports this rank's reason rather than an end of file.
  void close_after_timeout(const std::string& message);
  // Sends the peer a stop notice with `reason` after the send being written, if any (queued
  // sends that have not started fail with `reason`). The request completes once it is written
  // (or fails); the caller closes the pair afterwards (fail()).
  Request send_stop_notice(const std::string& reason);
  // Asks the peer what it waits for (a wait query, ahead of queued sends); its answer, or
  // nullopt when none came within `wait` or the pair failed. Thread-safe.
  std::optional<WaitAnswer> ask(std::chrono::milliseconds wait);

 private:
  struct SendOp {
    FrameHeaderBytes header;
    std::span<const std::byte> bytes;
    std::shared_ptr<RequestState> state;      // null for wait queries and answers
    std::shared_ptr<WaitAnswerBytes> answer;  // a wait answer's payload (bytes point here)
  };
  struct RecvOp {
    std::span<std::byte> into;
    std::shared_ptr<RequestState> state;
  };
  // A message whose payload arrived before its receive was posted. Its payload is read in
  // chunks; once a receive is matched to it (`waiter`), the bytes staged so far are copied to
  // the receive's buffer once and the rest is read straight into that buffer (`direct`).
  struct Staged {
    uint64_t length = 0;
    uint64_t received = 0;
    std::unique_ptr<std::byte[]> data;  // uninitialized staging memory (null once direct)
    size_t capacity = 0;
    bool keep = true;     // false: a too-long message whose bytes are read and dropped
    bool direct = false;  // the rest goes straight to waiter->into
    bool complete = false;
    std::optional<RecvOp> waiter;  // a receive matched while the payload was still arriving
  };

  void on_error(const error_code& ec, const char* doing);
  // A send failed (the peer closed or reset the connection). What the peer sent before, such
  // as a stop notice saying why it stopped, may still be unread: the read side ends the pair
  // when it reaches the end, and this error does only if that has not happened within 1 s.
  void on_send_error(const error_code& ec);
  void write_next();
  void post_recv(uint32_t tag, RecvOp op);
  void deliver(const Staged& staged, RecvOp& op);
  void read_header();
  void on_header();
  void read_stop_notice(uint64_t length);
  void answer_query(uint64_t length);
  void read_answer(uint64_t length);
  // Queues a wait query or answer before the queued sends (after the write in progress).
  void send_urgent(SendOp op);
  // Reads the payload into a staging buffer (`keep`: queue it for a later receive).
  void stage(const FrameHeader& header, bool keep);
  // Reads the next chunk of a staged payload (or completes it).
  void read_staged(const std::shared_ptr<Staged>& staged);
  void staged_done(const std::shared_ptr<Staged>& staged);
  // Staging memory of at least `bytes`, reusing the last released buffer (no page faults for a
  // steady stream of early messages); release_staging() returns a buffer for reuse.
  void take_staging(Staged& staged, size_t bytes);
  void release_staging(Staged& staged);

  tcp::socket socket_;

  std::string failed_;  // non-empty once the connection is gone
  std::deque<SendOp> sendq_;
  std::deque<SendOp> urgent_;  // wait queries and answers: written before sendq_
  bool writing_ = false;
  bool writing_urgent_ = false;  // the write in progress is urgent_.front()
  AskedQueries asks_;
  WaitAnswerBytes answer_in_{};
  FrameHeaderBytes header_{};
  std::unordered_map<uint32_t, std::deque<RecvOp>> posted_;
  std::unordered_map<uint32_t, std::deque<std::shared_ptr<Staged>>> staged_;
  std::shared_ptr<Staged> reading_;     // the staged message whose payload is arriving
  std::unique_ptr<std::byte[]> spare_;  // a released staging buffer kept for reuse
  size_t spare_capacity_ = 0;
  std::string stop_out_;  // the stop notice being sent
  std::string stop_in_;   // the peer's stop notice being read
};

}  // namespace threelc::transport::detail
