// UcxPair's data path: tagged sends and receives posted on the progress thread, their
// completions, the endpoint's error callback and its close (see ucx_pair.h).
#include "ucx_pair.h"

#include <cstdio>
#include <vector>

#include "frame.h"

namespace threelc::transport::detail {

namespace {

// Every bit of the tag counts: the sender's rank and the caller's tag.
constexpr uint64_t kFullMask = ~uint64_t{0};
// What a zero-length message points at (UCX is given a valid address even for 0 bytes).
std::byte empty_message[1];

}  // namespace

UcxPair::UcxPair(UcxWorker& worker, int self, int peer, const Options& options, Links links)
    : PairRequests(self, peer, "rank " + std::to_string(peer), options, std::move(links)),
      worker_(worker) {}

UcxPair::~UcxPair() = default;

Request UcxPair::send(uint32_t tag, std::span<const std::byte> bytes) {
  auto state = make_send_state(tag, bytes.size());
  if (fail_if_too_large(*state, bytes.size())) return Request(state);
  worker_.post([self = shared_from_this(), tag, bytes, state] {
    auto op = std::make_unique<Op>(Op{self.get(), state});
    op->tag = tag;
    op->bytes = bytes.size();
    self->post_send(std::move(op), bytes);
  });
  return Request(state);
}

Request UcxPair::recv(uint32_t tag, std::span<std::byte> into) {
  auto state = make_recv_state(tag);
  worker_.post([self = shared_from_this(), tag, into, state] {
    auto op = std::make_unique<Op>(Op{self.get(), state});
    op->receive = true;
    op->tag = tag;
    op->capacity = into.size();
    self->post_recv(std::move(op), into);
  });
  return Request(state);
}

std::string UcxPair::open(std::span<const std::byte> address) {
  ucp_ep_params_t params{};
  params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                      UCP_EP_PARAM_FIELD_ERR_HANDLER;
  params.address = reinterpret_cast<const ucp_address_t*>(address.data());
  params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  params.err_handler.cb = &UcxPair::on_endpoint_error;
  params.err_handler.arg = this;
  const ucs_status_t status = ucp_ep_create(worker_.handle(), &params, &ep_);
  if (status == UCS_OK) {
    auto goodbye = std::make_unique<Op>(
        Op{this, std::make_shared<RequestState>(peer_, "goodbye from " + name_, timeout_)});
    goodbye->receive = true;
    goodbye->kind = Kind::kGoodbye;
    goodbye->capacity = kMaxStopNoticeBytes;
    goodbye_ = goodbye.get();
    goodbye_in_.assign(kMaxStopNoticeBytes, '\0');
    start_recv(std::move(goodbye), std::as_writable_bytes(std::span(goodbye_in_)),
               goodbye_tag(peer_));
    post_wait_receive(Kind::kQuery);
    post_wait_receive(Kind::kAnswer);
    return {};
  }
  ep_ = nullptr;
  failed_ = prefix() + "cannot reach " + name_ +
            " over UCX (ucp_ep_create: " + ucx_status_text(status) +
            "; UCX_TLS selects the transports)";
  return failed_;
}

void UcxPair::fail(const std::string& message) {
  if (failed_.empty()) {
    fail_requests(message);
  } else if (goodbye_ != nullptr) {
    // Closing, and the peer's goodbye will not come now.
    ucp_request_cancel(worker_.handle(), goodbye_->request);
  } else {
    return;  // failed or closed before
  }
  // Not from inside UCX's error callback: on the next turn of the progress loop.
  worker_.post([self = shared_from_this()] { self->close_endpoint(/*force=*/true); });
}

void UcxPair::close(const std::string& message, bool notice) {
  if (said_goodbye_) return;  // the endpoint closes once the peer's goodbye is in
  if (!failed_.empty()) return close_endpoint(/*force=*/true);  // broken, or the peer said goodbye
  send_goodbye(notice ? message : std::string());
  fail_requests(message, /*keep_goodbye=*/true);
  // The endpoint closes once the peer's goodbye is in (finish()), so that no message of the
  // peer's is left unmatched when the worker goes.
}

void UcxPair::send_goodbye(const std::string& notice) {
  said_goodbye_ = true;
  goodbye_out_ = notice.substr(0, kMaxStopNoticeBytes);  // kept until the pair goes
  const void* data = goodbye_out_.empty() ? static_cast<const void*>(empty_message)
                                          : static_cast<const void*>(goodbye_out_.data());
  send_untracked(data, goodbye_out_.size(), goodbye_tag(self_), nullptr);
}

void UcxPair::send_untracked(const void* bytes, size_t length, uint64_t tag,
                             WaitAnswerBytes* owned) {
  if (ep_ == nullptr) {
    delete owned;
    return;
  }
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  param.cb.send = &UcxPair::on_untracked_sent;
  param.user_data = owned;
  ucs_status_ptr_t request = ucp_tag_send_nbx(ep_, bytes, length, tag, &param);
  // Done at once, or failed (the peer is gone): nothing to wait for. Else on_untracked_sent.
  if (request == nullptr || UCS_PTR_IS_ERR(request)) delete owned;
}

std::optional<WaitAnswer> UcxPair::ask(std::chrono::milliseconds wait) {
  auto pending = std::make_shared<PendingAnswer>();
  worker_.post([self = shared_from_this(), pending] {
    if (!self->failed_.empty()) return pending->set(std::nullopt);
    self->asks_.add(pending);
    self->send_untracked(empty_message, 0, query_tag(self->self_), nullptr);
  });
  return pending->wait_for(wait);
}

void UcxPair::post_wait_receive(Kind kind) {
  if (!failed_.empty()) return;
  const bool query = kind == Kind::kQuery;
  auto op = std::make_unique<Op>(Op{
      this,
      std::make_shared<RequestState>(
          peer_, std::string(query ? "wait query" : "wait answer") + " from " + name_, timeout_)});
  op->receive = true;
  op->kind = kind;
  op->capacity = query ? 0 : kWaitAnswerBytes;
  auto into = query ? std::span<std::byte>() : std::span<std::byte>(answer_in_);
  start_recv(std::move(op), into, query ? query_tag(peer_) : answer_tag(peer_));
}

void UcxPair::on_query() {
  if (!failed_.empty()) return;  // closing: the peer learns why from the goodbye
  const WaitAnswer answer = longest_wait();
  auto* payload = new WaitAnswerBytes(encode_wait_answer(answer));
  send_untracked(payload->data(), payload->size(), answer_tag(self_), payload);
  post_wait_receive(Kind::kQuery);
}

void UcxPair::on_answer(size_t length) {
  WaitAnswer answer;
  const std::string error =
      parse_wait_answer(std::span(answer_in_).first(std::min(length, answer_in_.size())), answer);
  if (!error.empty()) return fail(prefix() + "malformed message from " + name_ + ": " + error);
  asks_.answer(answer);
  post_wait_receive(Kind::kAnswer);
}

void UcxPair::fail_requests(const std::string& message, bool keep_goodbye) {
  failed_ = message;
  // Canceling a receive completes it at once (its callback runs here), so UCX no longer writes
  // into the caller's buffer once the request reports the failure.
  std::vector<Op*> ops;
  ops.reserve(in_flight_.size());
  for (auto& [op, owned] : in_flight_) ops.push_back(op);
  for (Op* op : ops) {
    if (op->receive && !(keep_goodbye && op->kind == Kind::kGoodbye) && in_flight_.count(op)) {
      ucp_request_cancel(worker_.handle(), op->request);
    }
  }
  // Sends end when the endpoint is closed (a forced close completes them with
  // UCS_ERR_CANCELED); their requests fail now, and the late completions find them done.
  for (auto& [op, owned] : in_flight_) op->state->fail(message);
  asks_.fail_all();
}

void UcxPair::print_info() const {
  if (ep_ == nullptr) return;
  std::fprintf(stderr, "threelc: rank %d: UCX endpoint to rank %d:\n", self_, peer_);
  ucp_ep_print_info(ep_, stderr);
}

void UcxPair::close_after_timeout(const std::string& message) {
  worker_.post([self = shared_from_this(), message] { self->fail(message); });
}

void UcxPair::post_send(std::unique_ptr<Op> owned, std::span<const std::byte> bytes) {
  if (!failed_.empty()) return owned->state->fail(failed_);
  Op* op = track(std::move(owned));
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  param.cb.send = &UcxPair::on_send;
  param.user_data = op;
  const void* data = bytes.empty() ? empty_message : bytes.data();
  started(op, ucp_tag_send_nbx(ep_, data, bytes.size(), ucx_tag(self_, op->tag), &param));
}

void UcxPair::post_recv(std::unique_ptr<Op> owned, std::span<std::byte> into) {
  // After a failure, what arrived before it can still be received (as on TCP).
  if (!failed_.empty() && !arrived(owned->tag)) return owned->state->fail(failed_);
  const uint64_t tag = ucx_tag(peer_, owned->tag);
  start_recv(std::move(owned), into, tag);
}

bool UcxPair::arrived(uint32_t tag) const {
  ucp_tag_recv_info_t info{};
  return ucp_tag_probe_nb(worker_.handle(), ucx_tag(peer_, tag), kFullMask, 0, &info) != nullptr;
}

void UcxPair::start_recv(std::unique_ptr<Op> owned, std::span<std::byte> into, uint64_t tag) {
  Op* op = track(std::move(owned));
  ucp_request_param_t param{};
  // No immediate completion: UCX 1.13 leaves recv_info unset when a receive completes at once
  // (openucx/ucx#9425, fixed in 1.16), so the length always comes through the callback.
  param.op_attr_mask =
      UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
  param.cb.recv = &UcxPair::on_recv;
  param.user_data = op;
  void* data = into.empty() ? empty_message : into.data();
  started(op, ucp_tag_recv_nbx(worker_.handle(), data, into.size(), tag, kFullMask, &param));
}

UcxPair::Op* UcxPair::track(std::unique_ptr<Op> owned) {
  Op* op = owned.get();
  if (!op->receive) worker_.send_started();
  in_flight_.emplace(op, std::move(owned));
  return op;
}

void UcxPair::started(Op* op, ucs_status_ptr_t request) {
  // The callback may have run already (it frees the request and forgets the op).
  if (request == nullptr || UCS_PTR_IS_ERR(request)) {
    return finish(op, UCS_PTR_STATUS(request), op->bytes);  // (a no-op when already finished)
  }
  auto it = in_flight_.find(op);
  if (it != in_flight_.end()) op->request = request;
}

void UcxPair::finish(Op* op, ucs_status_t status, size_t length) {
  auto it = in_flight_.find(op);
  if (it == in_flight_.end()) return;
  const std::unique_ptr<Op> owned = std::move(it->second);
  in_flight_.erase(it);
  if (!owned->receive) worker_.send_ended();
  if (owned->kind == Kind::kQuery || owned->kind == Kind::kAnswer) {
    const bool query = owned->kind == Kind::kQuery;
    if (status == UCS_ERR_MESSAGE_TRUNCATED) {
      return fail(prefix() + "malformed message from " + name_ + ": a wait " +
                  (query ? "query with a payload"
                         : "answer longer than " + std::to_string(kWaitAnswerBytes) + " bytes"));
    }
    if (status != UCS_OK) return;  // canceled: the pair failed or closes
    return query ? on_query() : on_answer(length);
  }
  if (owned->kind == Kind::kGoodbye) {
    goodbye_ = nullptr;
    // Canceled: this pair failed. Received: the peer shut down, after its last message. Unless
    // this side is closing too, its requests fail and it says goodbye back; either way the
    // endpoint closes after a flush.
    if (status != UCS_OK) return;
    if (failed_.empty()) {
      if (length == 0) {
        fail_requests(prefix() + name_ +
                      " closed the connection (its transport context was shut down)");
      } else {
        const std::string reason = goodbye_in_.substr(0, length);
        fail_requests(prefix() + name_ + " stopped: " + reason);
        if (links_.on_stop) links_.on_stop(peer_, reason);  // relays to the other peers
      }
      if (!said_goodbye_) send_goodbye();
    }
    return close_endpoint(/*force=*/false);
  }
  RequestState& state = *owned->state;
  if (status == UCS_OK) return state.complete(length);
  if (status == UCS_ERR_MESSAGE_TRUNCATED) {
    // The message is consumed (dropped), as on TCP; the pair goes on.
    return fail_too_long(state, length, owned->capacity);
  }
  if (!failed_.empty()) return state.fail(failed_);
  state.fail(prefix() + state.what + " failed: " + ucx_status_text(status));
}

void UcxPair::close_endpoint(bool force) {
  if (ep_ == nullptr) return;
  ucp_request_param_t param{};
  param.op_attr_mask =
      UCP_OP_ATTR_FIELD_FLAGS | UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  param.flags = force ? UCP_EP_CLOSE_FLAG_FORCE : 0;
  param.cb.send = &UcxPair::on_closed;
  param.user_data = this;
  ucs_status_ptr_t request = ucp_ep_close_nbx(ep_, &param);
  ep_ = nullptr;
  if (request != nullptr && !UCS_PTR_IS_ERR(request)) closing_ = request;
}

void UcxPair::on_send(void* request, ucs_status_t status, void* user_data) {
  auto* op = static_cast<Op*>(user_data);
  op->pair->finish(op, status, op->bytes);
  ucp_request_free(request);
}

void UcxPair::on_recv(void* request, ucs_status_t status, const ucp_tag_recv_info_t* info,
                      void* user_data) {
  auto* op = static_cast<Op*>(user_data);
  op->pair->finish(op, status, info != nullptr ? info->length : 0);
  ucp_request_free(request);
}

void UcxPair::on_endpoint_error(void* arg, ucp_ep_h /*ep*/, ucs_status_t status) {
  auto* pair = static_cast<UcxPair*>(arg);
  pair->fail(pair->prefix() + "connection to " + pair->name_ + " failed: UCX reports " +
             ucx_status_text(status));
}

void UcxPair::on_untracked_sent(void* request, ucs_status_t /*status*/, void* user_data) {
  delete static_cast<WaitAnswerBytes*>(user_data);
  ucp_request_free(request);
}

void UcxPair::on_closed(void* request, ucs_status_t /*status*/, void* user_data) {
  static_cast<UcxPair*>(user_data)->closing_ = nullptr;
  ucp_request_free(request);
}

}  // namespace threelc::transport::detail
