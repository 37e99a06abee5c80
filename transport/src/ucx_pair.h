// UcxPair: the data channel to one peer over a UCX endpoint (tagged sends and receives, the
// endpoint's failure, its close). send() / recv() / close_after_timeout() / ask() post to the
// worker's progress thread; everything else runs on it.
//
// Tags: the UCX tag of a message is (sender rank << 32) | caller's tag, and a receive matches
// it with a full mask, so a pair only sees its peer's messages and messages of one tag from
// one peer match in send order (UCX keeps an endpoint's messages in order, and the progress
// thread posts them in the order the caller did). Bit 63 (never set by a rank < 2^31) marks
// the pair's own goodbye: the empty message a rank sends each peer when its context shuts down,
// after its last message. It plays TCP's end of file: the peer's pending receives fail at once
// ("rank 2 closed the connection"), while what arrived before it can still be received. A rank
// that gets a goodbye answers with its own, and each closes its endpoint only once the peer's
// goodbye is in, so that no message is left unmatched when the worker goes. A goodbye with text
// (at most kMaxStopNoticeBytes) is a stop notice, as on TCP: the peer's requests fail with
// "rank P stopped: <text>", and the context hears of it (StopHandler) to relay it. Bit 62 marks
// wait queries (caller's tag 0) and their answers (1): a receive of each stays posted while the
// pair is open, and the progress thread answers a query from this rank's WaitRegistry.
#pragma once

#include <ucp/api/ucp.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>

#include "pair_requests.h"
#include "request.h"
#include "threelc/transport/transport.h"
#include "ucx_worker.h"

namespace threelc::transport::detail {

class UcxPair final : public Pair,
                      public PairRequests<UcxPair>,
                      public std::enable_shared_from_this<UcxPair> {
 public:
  UcxPair(UcxWorker& worker, int self, int peer, const Options& options, Links links);
  ~UcxPair() override;

  int peer() const override { return peer_; }
  Request send(uint32_t tag, std::span<const std::byte> bytes) override;
  Request recv(uint32_t tag, std::span<std::byte> into) override;

  // --- progress thread only ---
  // Creates the endpoint to the peer's worker address; returns an empty string or the error.
  std::string open(std::span<const std::byte> address);
  // Fails every request of the pair with `message` (receives are canceled first, so UCX no
  // longer writes into their buffers) and force-closes the endpoint; later posts fail at once.
  void fail(const std::string& message);
  // Teardown: sends the goodbye, fails what is left (there should be nothing) and, once the
  // peer's goodbye is in, closes the endpoint after flushing it (so every message sent, goodbye
  // included, has left, and none of the peer's is left unmatched); closed() says when that
  // finished. A peer that fails meanwhile ends the wait (fail()).
  // `notice`: the goodbye carries `message` as a stop notice (Context::stop).
  void close(const std::string& message, bool notice = false);
  bool closed() const { return ep_ == nullptr && closing_ == nullptr; }
  // Writes UCX's view of the endpoint (its transports) to stderr (THREELC_TRANSPORT_DEBUG).
  void print_info() const;

  // Thread-safe fail() (Request::wait()'s timeout).
  void close_after_timeout(const std::string& message);
  // Asks the peer what it waits for; its answer, or nullopt when none came within `wait` or
  // the pair failed. Thread-safe.
  std::optional<WaitAnswer> ask(std::chrono::milliseconds wait);

 private:
  // What an Op is: a caller's transfer, or one of the receives the pair keeps posted itself
  // (no caller waits on those).
  enum class Kind { kTransfer, kGoodbye, kQuery, kAnswer };
  // One send or receive UCX holds; its address is the callback's user data.
  struct Op {
    UcxPair* pair;
    std::shared_ptr<RequestState> state;
    void* request = nullptr;  // UCX's handle, once posted
    bool receive = false;
    Kind kind = Kind::kTransfer;
    uint32_t tag = 0;
    size_t capacity = 0;  // receive buffer bytes
    size_t bytes = 0;     // send length
  };

  static void on_send(void* request, ucs_status_t status, void* user_data);
  static void on_recv(void* request, ucs_status_t status, const ucp_tag_recv_info_t* info,
                      void* user_data);
  static void on_endpoint_error(void* arg, ucp_ep_h ep, ucs_status_t status);
  static void on_closed(void* request, ucs_status_t status, void* user_data);
  // A send nobody waits for (goodbye, query, answer): frees the request (and user_data, an
  // answer's payload, when set).
  static void on_untracked_sent(void* request, ucs_status_t status, void* user_data);

  static uint64_t ucx_tag(int sender, uint32_t tag) {
    return (static_cast<uint64_t>(sender) << 32) | tag;
  }
  static uint64_t goodbye_tag(int sender) { return (uint64_t{1} << 63) | ucx_tag(sender, 0); }
  static uint64_t query_tag(int sender) { return (uint64_t{1} << 62) | ucx_tag(sender, 0); }
  static uint64_t answer_tag(int sender) { return (uint64_t{1} << 62) | ucx_tag(sender, 1); }
  // Posts the receive of the peer's next query or answer (kind kQuery or kAnswer).
  void post_wait_receive(Kind kind);
  // A query or an answer arrived (finish()).
  void on_query();
  void on_answer(size_t length);
  // Sends `bytes` with `tag` without tracking it; `owned` (may be null) is freed once sent.
  void send_untracked(const void* bytes, size_t length, uint64_t tag, WaitAnswerBytes* owned);
  // Marks the pair failed with `message`, cancels its receives and fails every request.
  // keep_goodbye: the receive of the peer's goodbye stays posted (close()).
  void fail_requests(const std::string& message, bool keep_goodbye = false);
  void post_send(std::unique_ptr<Op> owned, std::span<const std::byte> bytes);
  void post_recv(std::unique_ptr<Op> owned, std::span<std::byte> into);
  void start_recv(std::unique_ptr<Op> owned, std::span<std::byte> into, uint64_t tag);
  // Whether a message with `tag` from the peer waits in UCX's unexpected queue.
  bool arrived(uint32_t tag) const;
  void send_goodbye(const std::string& notice = {});
  // Keeps `owned` in in_flight_ before UCX sees it (a callback may run inside the post).
  Op* track(std::unique_ptr<Op> owned);
  // What the post returned: done at once, failed, or a request the callback completes.
  void started(Op* op, ucs_status_ptr_t request);
  // Completes `op` (UCX's status, the message's length) and forgets it.
  void finish(Op* op, ucs_status_t status, size_t length);
  void close_endpoint(bool force);

  UcxWorker& worker_;

  // Progress-thread state.
  ucp_ep_h ep_ = nullptr;
  void* closing_ = nullptr;  // the endpoint's close request while it runs
  std::string failed_;       // non-empty once the pair failed or was closed
  Op* goodbye_ = nullptr;    // the receive of the peer's goodbye while it is posted
  bool said_goodbye_ = false;
  std::string goodbye_in_;   // the peer's goodbye: empty, or its stop notice
  std::string goodbye_out_;  // this side's goodbye text while it is sent
  std::unordered_map<Op*, std::unique_ptr<Op>> in_flight_;
  AskedQueries asks_;
  WaitAnswerBytes answer_in_{};  // the posted receive of an answer
};

}  // namespace threelc::transport::detail
