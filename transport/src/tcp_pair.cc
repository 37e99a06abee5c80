// TcpPair's data path: the send queue, receives matched by tag, and messages staged until their
// receive is posted (see tcp_pair.h).
#include "tcp_pair.h"

#include <algorithm>
#include <array>
#include <cstring>
#include "rank_prefix.h"

namespace threelc::transport::detail {

namespace {
// The peer as messages name it.
std::string channel_name(int self, int peer, bool control) {
  if (control) {
    return self == 0 ? "rank " + std::to_string(peer) + " (control channel)"
                     : "the coordinator (rank 0, control channel)";
  }
  return "rank " + std::to_string(peer);
}

std::string reserved_tag_error(int self, uint32_t tag) {
  return rank_prefix(self) + "tag " + std::to_string(tag) + " is reserved (tags from " +
         std::to_string(kFirstReservedTag) +
         " up carry the transport's stop notices and wait queries)";
}
}  // namespace

TcpPair::TcpPair(tcp::socket socket, int self, int peer, bool control, const Options& options,
                 Links links)
    : PairRequests(self, peer, channel_name(self, peer, control), options, std::move(links)),
      socket_(std::move(socket)) {
  tune_socket(socket_);
}

Request TcpPair::send(uint32_t tag, std::span<const std::byte> bytes) {
  auto state = make_send_state(tag, bytes.size());
  if (tag >= kFirstReservedTag) {
    state->fail(reserved_tag_error(self_, tag));
    return Request(state);
  }
  if (fail_if_too_large(*state, bytes.size())) return Request(state);
  asio::post(socket_.get_executor(), [self = shared_from_this(), tag, bytes, state] {
    if (!self->failed_.empty()) return state->fail(self->failed_);
    self->sendq_.push_back(SendOp{encode_frame_header(tag, bytes.size()), bytes, state, nullptr});
    if (!self->writing_) self->write_next();
  });
  return Request(state);
}

Request TcpPair::recv(uint32_t tag, std::span<std::byte> into) {
  auto state = make_recv_state(tag);
  if (tag >= kFirstReservedTag) {
    state->fail(reserved_tag_error(self_, tag));
    return Request(state);
  }
  asio::post(socket_.get_executor(), [self = shared_from_this(), tag, into, state] {
    self->post_recv(tag, RecvOp{into, state});
  });
  return Request(state);
}

void TcpPair::start() {
  asio::post(socket_.get_executor(), [self = shared_from_this()] { self->read_header(); });
}

void TcpPair::fail(const std::string& message) {
  if (!failed_.empty()) return;
  failed_ = message;
  error_code ec;
  socket_.shutdown(tcp::socket::shutdown_both, ec);
  socket_.close(ec);
  for (auto& op : sendq_) op.state->fail(message);
  sendq_.clear();
  urgent_.clear();
  asks_.fail_all();
  for (auto& [tag, queue] : posted_) {
    for (auto& op : queue) op.state->fail(message);
  }
  posted_.clear();
  // A receive matched to the message that was still arriving (no longer in staged_).
  if (reading_ && reading_->waiter) reading_->waiter->state->fail(message);
  reading_.reset();
}

void TcpPair::close_after_timeout(const std::string& message) {
  asio::post(socket_.get_executor(), [self = shared_from_this(), message] {
    if (!self->failed_.empty()) return;
    if (!self->writing_ && self->stop_out_.empty()) {
      self->stop_out_ = message.substr(0, kMaxStopNoticeBytes);
      const FrameHeaderBytes header = encode_frame_header(kStopNoticeTag, self->stop_out_.size());
      const std::array<asio::const_buffer, 2> frame{asio::buffer(header),
                                                    asio::buffer(self->stop_out_)};
      // Never blocks: a socket that does not take it at once ends with a cut-off frame, which
      // the peer reads as a closed connection, as without a notice.
      error_code ec;
      self->socket_.non_blocking(true, ec);
      if (!ec) asio::write(self->socket_, frame, ec);
    }
    self->fail(message);
  });
}

Request TcpPair::send_stop_notice(const std::string& reason) {
  auto state = std::make_shared<RequestState>(peer_, "stop notice to " + name_, timeout_);
  asio::post(socket_.get_executor(), [self = shared_from_this(), reason, state] {
    if (!self->failed_.empty()) return state->fail(self->failed_);
    if (!self->stop_out_.empty()) return state->complete(0);  // sent already
    // The send being written stays (its bytes are half on the wire); the rest never start.
    const size_t keep = self->writing_ && !self->writing_urgent_ ? 1 : 0;
    while (self->sendq_.size() > keep) {
      self->sendq_.back().state->fail(reason);
      self->sendq_.pop_back();
    }
    self->stop_out_ = reason.substr(0, kMaxStopNoticeBytes);
    self->sendq_.push_back(SendOp{encode_frame_header(kStopNoticeTag, self->stop_out_.size()),
                                  std::as_bytes(std::span(self->stop_out_)), state, nullptr});
    if (!self->writing_) self->write_next();
  });
  return Request(state);
}

std::optional<WaitAnswer> TcpPair::ask(std::chrono::milliseconds wait) {
  auto pending = std::make_shared<PendingAnswer>();
  asio::post(socket_.get_executor(), [self = shared_from_this(), pending] {
    if (!self->failed_.empty()) return pending->set(std::nullopt);
    self->asks_.add(pending);
    self->send_urgent(SendOp{encode_frame_header(kWaitQueryTag, 0), {}, nullptr, nullptr});
  });
  return pending->wait_for(wait);
}

void TcpPair::send_urgent(SendOp op) {
  urgent_.push_back(std::move(op));
  if (!writing_) write_next();
}

void TcpPair::on_error(const error_code& ec, const char* doing) {
  if (!failed_.empty()) return;
  if (ec == asio::error::eof || ec == asio::error::connection_reset ||
      ec == asio::error::broken_pipe) {
    fail(prefix() + name_ + " closed the connection (" + ec.message() + " while " + doing + ")");
  } else {
    fail(prefix() + "connection to " + name_ + " failed while " + doing + ": " + ec.message());
  }
}

void TcpPair::on_send_error(const error_code& ec) {
  // writing_ stays true: nothing more is written; the pending sends fail with the pair.
  auto timer =
      std::make_shared<asio::steady_timer>(socket_.get_executor(), std::chrono::seconds(1));
  timer->async_wait(
      [self = shared_from_this(), timer, ec](const error_code&) { self->on_error(ec, "sending"); });
}

void TcpPair::write_next() {
  if ((sendq_.empty() && urgent_.empty()) || !failed_.empty()) {
    writing_ = false;
    return;
  }
  writing_ = true;
  writing_urgent_ = !urgent_.empty();
  auto& op = writing_urgent_ ? urgent_.front() : sendq_.front();
  std::array<asio::const_buffer, 2> buffers{asio::buffer(op.header),
                                            asio::buffer(op.bytes.data(), op.bytes.size())};
  asio::async_write(socket_, buffers, large_transfers,
                    [self = shared_from_this()](const error_code& ec, size_t) {
                      if (!self->failed_.empty()) return;
                      if (ec) return self->on_send_error(ec);
                      auto& queue = self->writing_urgent_ ? self->urgent_ : self->sendq_;
                      auto done = std::move(queue.front());
                      queue.pop_front();
                      if (done.state) done.state->complete(done.bytes.size());
                      self->write_next();
                    });
}

void TcpPair::post_recv(uint32_t tag, RecvOp op) {
  auto staged_it = staged_.find(tag);
  if (staged_it != staged_.end() && !staged_it->second.empty()) {
    auto staged = staged_it->second.front();
    staged_it->second.pop_front();
    if (staged->complete) {
      deliver(*staged, op);
      return release_staging(*staged);
    }
    if (!failed_.empty()) return op.state->fail(failed_);
    staged->waiter = std::move(op);
    return;
  }
  if (!failed_.empty()) return op.state->fail(failed_);
  posted_[tag].push_back(std::move(op));
}

void TcpPair::deliver(const Staged& staged, RecvOp& op) {
  if (staged.length > op.into.size()) {
    return fail_too_long(*op.state, staged.length, op.into.size());
  }
  if (staged.length != 0) std::memcpy(op.into.data(), staged.data.get(), staged.length);
  op.state->complete(staged.length);
}

void TcpPair::read_header() {
  if (!failed_.empty()) return;
  asio::async_read(socket_, asio::buffer(header_),
                   [self = shared_from_this()](const error_code& ec, size_t) {
                     if (!self->failed_.empty()) return;
                     if (ec) return self->on_error(ec, "receiving");
                     self->on_header();
                   });
}

void TcpPair::on_header() {
  FrameHeader header;
  if (auto error = parse_frame_header(header_, max_bytes_, header); !error.empty()) {
    return fail(prefix() + "malformed frame from " + name_ + " (" + remote_text(socket_) +
                "): " + error);
  }
  if (header.tag == kStopNoticeTag) return read_stop_notice(header.length);
  if (header.tag == kWaitQueryTag) return answer_query(header.length);
  if (header.tag == kWaitAnswerTag) return read_answer(header.length);
  auto posted_it = posted_.find(header.tag);
  if (posted_it != posted_.end() && !posted_it->second.empty()) {
    auto op = std::move(posted_it->second.front());
    posted_it->second.pop_front();
    if (header.length <= op.into.size()) {
      if (header.length == 0) {
        op.state->complete(0);
        return read_header();
      }
      // Straight into the caller's buffer.
      auto buffer = asio::buffer(op.into.data(), header.length);
      return asio::async_read(
          socket_, buffer, large_transfers,
          [self = shared_from_this(), op](const error_code& ec, size_t n) {
            // This receive is in neither posted_ nor reading_: fail() cannot reach it, so a
            // pair that failed while its bytes arrived fails it here (it waited to the
            // timeout before: the dead_peer engine job's rare hang).
            if (!self->failed_.empty()) return op.state->fail(self->failed_);
            if (ec) {
              op.state->fail(self->prefix() + "receiving from " + self->name_ + " failed");
              return self->on_error(ec, "receiving");
            }
            op.state->complete(n);
            self->read_header();
          });
    }
    fail_too_long(*op.state, header.length, op.into.size());
    return stage(header, /*keep=*/false);
  }
  stage(header, /*keep=*/true);
}

void TcpPair::read_stop_notice(uint64_t length) {
  if (length > kMaxStopNoticeBytes) {
    return fail(prefix() + "malformed frame from " + name_ + ": a stop notice of " +
                std::to_string(length) + " bytes (at most " + std::to_string(kMaxStopNoticeBytes) +
                ")");
  }
  stop_in_.assign(length, '\0');
  asio::async_read(socket_, asio::buffer(stop_in_),
                   [self = shared_from_this()](const error_code& ec, size_t) {
                     if (!self->failed_.empty()) return;
                     if (ec) return self->on_error(ec, "receiving a stop notice");
                     // The handler fails this pair (and every other) with the reason.
                     self->links_.on_stop(self->peer_, self->stop_in_);
                   });
}

void TcpPair::answer_query(uint64_t length) {
  if (length != 0) {
    return fail(prefix() + "malformed frame from " + name_ + ": a wait query of " +
                std::to_string(length) + " bytes (it has none)");
  }
  const WaitAnswer answer = longest_wait();
  auto payload = std::make_shared<WaitAnswerBytes>(encode_wait_answer(answer));
  send_urgent(SendOp{encode_frame_header(kWaitAnswerTag, payload->size()),
                     std::as_bytes(std::span(*payload)), nullptr, payload});
  read_header();
}

void TcpPair::read_answer(uint64_t length) {
  if (length != kWaitAnswerBytes) {
    return fail(prefix() + "malformed frame from " + name_ + ": a wait answer of " +
                std::to_string(length) + " bytes (expected " + std::to_string(kWaitAnswerBytes) +
                ")");
  }
  asio::async_read(socket_, asio::buffer(answer_in_),
                   [self = shared_from_this()](const error_code& ec, size_t) {
                     if (!self->failed_.empty()) return;
                     if (ec) return self->on_error(ec, "receiving a wait answer");
                     WaitAnswer answer;
                     (void)parse_wait_answer(self->answer_in_, answer);  // the length is right
                     self->asks_.answer(answer);
                     self->read_header();
                   });
}

// Payload bytes read per system call, and the staging buffer of a dropped message.
constexpr size_t kStagingChunk = size_t{1} << 20;

void TcpPair::stage(const FrameHeader& header, bool keep) {
  auto staged = std::make_shared<Staged>();
  staged->length = header.length;
  staged->keep = keep;
  take_staging(*staged, keep ? header.length : std::min<uint64_t>(header.length, kStagingChunk));
  if (keep) staged_[header.tag].push_back(staged);
  reading_ = staged;
  read_staged(staged);
}

void TcpPair::read_staged(const std::shared_ptr<Staged>& staged) {
  if (staged->waiter && !staged->direct) {
    RecvOp& op = *staged->waiter;
    if (staged->length > op.into.size()) {
      fail_too_long(*op.state, staged->length, op.into.size());
      staged->waiter.reset();
    } else {
      // Hand over: copy what has arrived, read the rest straight into the receive's buffer.
      if (staged->received != 0) std::memcpy(op.into.data(), staged->data.get(), staged->received);
      release_staging(*staged);
      staged->direct = true;
    }
  }
  if (staged->received == staged->length) return staged_done(staged);
  const size_t chunk = std::min<uint64_t>(staged->length - staged->received, kStagingChunk);
  std::byte* target = staged->direct ? staged->waiter->into.data() + staged->received
                      : staged->keep ? staged->data.get() + staged->received
                                     : staged->data.get();  // dropped: overwrite one chunk
  socket_.async_read_some(asio::buffer(target, chunk),
                          [self = shared_from_this(), staged](const error_code& ec, size_t n) {
                            if (!self->failed_.empty()) return;
                            if (ec) return self->on_error(ec, "receiving");
                            staged->received += n;
                            self->read_staged(staged);
                          });
}

void TcpPair::staged_done(const std::shared_ptr<Staged>& staged) {
  staged->complete = true;
  reading_.reset();
  if (!staged->keep) release_staging(*staged);
  if (staged->waiter) {
    if (staged->direct) {
      staged->waiter->state->complete(staged->length);
    } else {
      deliver(*staged, *staged->waiter);
      release_staging(*staged);
    }
    staged->waiter.reset();
  }
  read_header();
}

void TcpPair::take_staging(Staged& staged, size_t bytes) {
  if (spare_ && spare_capacity_ >= bytes) {
    staged.data = std::move(spare_);
    staged.capacity = spare_capacity_;
    spare_capacity_ = 0;
  } else if (bytes != 0) {
    staged.data.reset(new std::byte[bytes]);  // uninitialized: every byte is read into first
    staged.capacity = bytes;
  }
}

void TcpPair::release_staging(Staged& staged) {
  if (staged.data && staged.capacity > spare_capacity_) {
    spare_ = std::move(staged.data);
    spare_capacity_ = staged.capacity;
  }
  staged.data.reset();
  staged.capacity = 0;
}

}  // namespace threelc::transport::detail
