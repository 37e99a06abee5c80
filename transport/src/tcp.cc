// The TCP transport over Boost.Asio: one I/O thread per context runs every socket operation.
// The rendezvous and the handshakes are coroutines (each handshake with its own deadline, many at
// once, so a silent or slow connector holds up nobody); the data path is callback-driven.
#include <utility>  // before any Asio header (Boost 1.74 with C++20)

#include <boost/asio.hpp>
// clang-format off
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
// clang-format on

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <deque>
#include <future>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>
#include <vector>

#include "auth.h"
#include "frame.h"
#include "request.h"
#include "tcp.h"
#include "threelc/transport/transport.h"

namespace threelc::transport::detail {
namespace {

namespace asio = boost::asio;
using asio::ip::tcp;
using Clock = std::chrono::steady_clock;
using boost::system::error_code;

constexpr uint32_t kProtocolVersion = 1;
// Handshake frame tags (only before a connection becomes a Pair).
constexpr uint32_t kTagHello = 1, kTagChallenge = 2, kTagProof = 3, kTagVerdict = 4, kTagTable = 5;
constexpr uint64_t kMaxHandshakeFrame = 1024;
constexpr uint32_t kKindControl = 1, kKindData = 2;
constexpr std::string_view kClientLabel = "threelc v1 client proof";
constexpr std::string_view kServerLabel = "threelc v1 server proof";

std::string seconds_text(std::chrono::milliseconds ms) {
  char text[32];
  std::snprintf(text, sizeof text, "%g s", static_cast<double>(ms.count()) / 1000.0);
  return text;
}

std::string endpoint_text(const tcp::endpoint& endpoint) {
  const auto address = endpoint.address();
  return (address.is_v6() ? "[" + address.to_string() + "]" : address.to_string()) + ":" +
         std::to_string(endpoint.port());
}

std::string remote_text(const tcp::socket& socket) {
  error_code ec;
  const auto endpoint = socket.remote_endpoint(ec);
  return ec ? std::string("an unknown address") : endpoint_text(endpoint);
}

// Asio's transfer_all moves at most 64 KiB per system call; large messages go in 1 MiB calls
// (the largest block iperf3 allows; 16 MiB calls measured no faster on loopback).
size_t large_transfers(const error_code& ec, size_t) { return ec ? 0 : size_t{1} << 20; }

// Socket buffers are left to the kernel: setting SO_SNDBUF/SO_RCVBUF turns off its autotuning.
void tune_socket(tcp::socket& socket) {
  error_code ec;
  socket.set_option(tcp::no_delay(true), ec);
}

// --- byte helpers for handshake payloads -------------------------------------------------------
struct Writer {
  std::vector<std::byte> bytes;
  void u32(uint32_t v) {
    for (int i = 0; i < 4; ++i) bytes.push_back(static_cast<std::byte>((v >> (8 * i)) & 0xFF));
  }
  void raw(std::span<const std::byte> b) { bytes.insert(bytes.end(), b.begin(), b.end()); }
  void text(const std::string& s) {
    u32(static_cast<uint32_t>(s.size()));
    raw(std::as_bytes(std::span(s.data(), s.size())));
  }
};

struct Reader {
  std::span<const std::byte> bytes;
  size_t at = 0;
  bool ok = true;
  uint32_t u32() {
    if (bytes.size() - at < 4) {
      ok = false;
      return 0;
    }
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(bytes[at + i]) << (8 * i);
    at += 4;
    return v;
  }
  template <size_t N>
  std::array<std::byte, N> fixed() {
    std::array<std::byte, N> out{};
    if (bytes.size() - at < N) {
      ok = false;
      return out;
    }
    std::memcpy(out.data(), bytes.data() + at, N);
    at += N;
    return out;
  }
  std::string text(size_t max) {
    const uint32_t n = u32();
    if (!ok || n > max || bytes.size() - at < n) {
      ok = false;
      return {};
    }
    std::string s(reinterpret_cast<const char*>(bytes.data() + at), n);
    at += n;
    return s;
  }
};

// A handshake failure that concerns the remote end (logged, connection dropped).
struct HandshakeError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

asio::awaitable<void> write_frame(tcp::socket& socket, uint32_t tag,
                                  std::span<const std::byte> payload) {
  const auto header = encode_frame_header(tag, payload.size());
  std::array<asio::const_buffer, 2> buffers{asio::buffer(header),
                                            asio::buffer(payload.data(), payload.size())};
  co_await asio::async_write(socket, buffers, asio::use_awaitable);
}

// Reads one frame with `tag` whose length is at most `max_length`; throws HandshakeError.
asio::awaitable<std::vector<std::byte>> read_frame(tcp::socket& socket, uint32_t tag,
                                                   uint64_t max_length) {
  FrameHeaderBytes raw{};
  error_code ec;
  co_await asio::async_read(socket, asio::buffer(raw),
                            asio::redirect_error(asio::use_awaitable, ec));
  if (ec) {
    throw HandshakeError(ec == asio::error::eof ? "connection closed during the handshake"
                                                : "handshake read failed: " + ec.message());
  }
  FrameHeader header;
  if (auto error = parse_frame_header(raw, max_length, header); !error.empty()) {
    throw HandshakeError(error);
  }
  if (header.tag != tag) {
    throw HandshakeError("unexpected handshake frame tag " + std::to_string(header.tag) +
                         " (expected " + std::to_string(tag) + ")");
  }
  std::vector<std::byte> payload(header.length);
  co_await asio::async_read(socket, asio::buffer(payload),
                            asio::redirect_error(asio::use_awaitable, ec));
  if (ec) {
    throw HandshakeError(ec == asio::error::eof ? "connection closed during the handshake"
                                                : "handshake read failed: " + ec.message());
  }
  co_return payload;
}

// What a connector says about itself (the hello frame).
struct Hello {
  uint32_t version = kProtocolVersion;
  uint32_t kind = 0;
  int rank = 0;
  int size = 0;
  std::string host;  // the connector's data listener (control hello only)
  uint16_t port = 0;
  Nonce nonce{};

  std::vector<std::byte> encode() const {
    Writer w;
    w.u32(version);
    w.u32(kind);
    w.u32(static_cast<uint32_t>(rank));
    w.u32(static_cast<uint32_t>(size));
    w.text(host);
    w.u32(port);
    w.raw(nonce);
    return w.bytes;
  }
  static bool decode(std::span<const std::byte> bytes, Hello& out) {
    Reader r{bytes};
    out.version = r.u32();
    out.kind = r.u32();
    out.rank = static_cast<int>(r.u32());
    out.size = static_cast<int>(r.u32());
    out.host = r.text(255);
    const uint32_t port = r.u32();
    out.port = static_cast<uint16_t>(port);
    out.nonce = r.fixed<32>();
    return r.ok && r.at == bytes.size() && port <= 65535;
  }
};

Mac proof(const std::string& secret, std::string_view label, std::span<const std::byte> hello,
          std::span<const std::byte> challenge) {
  const std::span<const std::byte> parts[] = {hello, challenge};
  return hmac_sha256(secret, label, parts);
}

std::string resolve_listen_host(const Options& options, const std::string& fallback) {
  if (options.listen_host.empty()) return fallback;
  error_code ec;
  asio::ip::make_address(options.listen_host, ec);
  if (!ec) return options.listen_host;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) throw Error(-1, "threelc: getifaddrs failed");
  std::string found;
  for (ifaddrs* it = list; it != nullptr; it = it->ifa_next) {
    if (it->ifa_addr == nullptr || options.listen_host != it->ifa_name) continue;
    if (it->ifa_addr->sa_family == AF_INET) {
      char text[INET_ADDRSTRLEN];
      const auto* in = reinterpret_cast<const sockaddr_in*>(it->ifa_addr);
      if (inet_ntop(AF_INET, &in->sin_addr, text, sizeof text) != nullptr) {
        found = text;
        break;
      }
    }
  }
  freeifaddrs(list);
  if (found.empty()) {
    throw Error(-1, "threelc: THREELC_IFACE='" + options.listen_host +
                        "' is neither an address nor an interface with an IPv4 address");
  }
  return found;
}

// --- the data path ---------------------------------------------------------------------------

class TcpPair final : public Pair, public std::enable_shared_from_this<TcpPair> {
 public:
  TcpPair(tcp::socket socket, int self, int peer, bool control, const Options& options)
      : socket_(std::move(socket)),
        self_(self),
        peer_(peer),
        control_(control),
        max_bytes_(options.max_message_bytes),
        timeout_(options.timeout),
        name_(peer_name()) {
    tune_socket(socket_);
  }

  int peer() const override { return peer_; }

  Request send(uint32_t tag, std::span<const std::byte> bytes) override {
    auto state = make_state("send of " + std::to_string(bytes.size()) + " bytes with tag " +
                            std::to_string(tag) + " to " + name_);
    if (bytes.size() > max_bytes_) {
      state->fail("threelc rank " + std::to_string(self_) + ": " + state->what +
                  " exceeds THREELC_MAX_MESSAGE_BYTES=" + std::to_string(max_bytes_));
      return Request(state);
    }
    asio::post(socket_.get_executor(), [self = shared_from_this(), tag, bytes, state] {
      if (!self->failed_.empty()) return state->fail(self->failed_);
      self->sendq_.push_back(SendOp{encode_frame_header(tag, bytes.size()), bytes, state});
      if (!self->writing_) self->write_next();
    });
    return Request(state);
  }

  Request recv(uint32_t tag, std::span<std::byte> into) override {
    auto state = make_state("receive with tag " + std::to_string(tag) + " from " + name_);
    asio::post(socket_.get_executor(), [self = shared_from_this(), tag, into, state] {
      self->post_recv(tag, RecvOp{into, state});
    });
    return Request(state);
  }

  // Starts the read loop (on the I/O thread).
  void start() {
    asio::post(socket_.get_executor(), [self = shared_from_this()] { self->read_header(); });
  }

  // Fails every request and closes the socket (I/O thread only).
  void fail(const std::string& message) {
    if (!failed_.empty()) return;
    failed_ = message;
    error_code ec;
    socket_.shutdown(tcp::socket::shutdown_both, ec);
    socket_.close(ec);
    for (auto& op : sendq_) op.state->fail(message);
    sendq_.clear();
    for (auto& [tag, queue] : posted_) {
      for (auto& op : queue) op.state->fail(message);
    }
    posted_.clear();
    // A receive matched to the message that was still arriving (no longer in staged_).
    if (reading_ && reading_->waiter) reading_->waiter->state->fail(message);
    reading_.reset();
  }

  // Thread-safe close for the context's shutdown.
  void close_from_any_thread(const std::string& message) {
    asio::post(socket_.get_executor(),
               [self = shared_from_this(), message] { self->fail(message); });
  }

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

  std::string peer_name() const {
    if (control_) {
      return self_ == 0 ? "rank " + std::to_string(peer_) + " (control channel)"
                        : "the coordinator (rank 0, control channel)";
    }
    return "rank " + std::to_string(peer_);
  }

  std::shared_ptr<RequestState> make_state(std::string what) {
    auto state = std::make_shared<RequestState>(peer_, std::move(what), timeout_);
    std::weak_ptr<TcpPair> weak = weak_from_this();
    state->on_timeout = [weak](const std::string& message) {
      if (auto self = weak.lock()) self->close_from_any_thread(message);
    };
    return state;
  }

  std::string prefix() const { return "threelc rank " + std::to_string(self_) + ": "; }

  void on_error(const error_code& ec, const char* doing) {
    if (!failed_.empty()) return;
    if (ec == asio::error::eof || ec == asio::error::connection_reset ||
        ec == asio::error::broken_pipe) {
      fail(prefix() + name_ + " closed the connection (" + ec.message() + " while " + doing + ")");
    } else {
      fail(prefix() + "connection to " + name_ + " failed while " + doing + ": " + ec.message());
    }
  }

  void write_next() {
    if (sendq_.empty() || !failed_.empty()) {
      writing_ = false;
      return;
    }
    writing_ = true;
    auto& op = sendq_.front();
    std::array<asio::const_buffer, 2> buffers{asio::buffer(op.header),
                                              asio::buffer(op.bytes.data(), op.bytes.size())};
    asio::async_write(socket_, buffers, large_transfers,
                      [self = shared_from_this()](const error_code& ec, size_t) {
                        if (!self->failed_.empty()) return;
                        if (ec) return self->on_error(ec, "sending");
                        auto done = std::move(self->sendq_.front());
                        self->sendq_.pop_front();
                        done.state->complete(done.bytes.size());
                        self->write_next();
                      });
  }

  void post_recv(uint32_t tag, RecvOp op) {
    auto staged_it = staged_.find(tag);
    if (staged_it != staged_.end() && !staged_it->second.empty()) {
      auto staged = staged_it->second.front();
      staged_it->second.pop_front();
      if (staged->complete) return deliver(*staged, op);
      if (!failed_.empty()) return op.state->fail(failed_);
      staged->waiter = std::move(op);
      return;
    }
    if (!failed_.empty()) return op.state->fail(failed_);
    posted_[tag].push_back(std::move(op));
  }

  void deliver(const Staged& staged, RecvOp& op) {
    if (staged.data.size() > op.into.size()) return too_long(op, staged.data.size());
    if (!staged.data.empty()) std::memcpy(op.into.data(), staged.data.data(), staged.data.size());
    op.state->complete(staged.data.size());
  }

  void too_long(RecvOp& op, uint64_t length) {
    op.state->fail(prefix() + "message of " + std::to_string(length) + " bytes from " + name_ +
                   " does not fit the receive buffer of " + std::to_string(op.into.size()) +
                   " bytes (" + op.state->what + ")");
  }

  void read_header() {
    if (!failed_.empty()) return;
    asio::async_read(socket_, asio::buffer(header_),
                     [self = shared_from_this()](const error_code& ec, size_t) {
                       if (!self->failed_.empty()) return;
                       if (ec) return self->on_error(ec, "receiving");
                       self->on_header();
                     });
  }

  void on_header() {
    FrameHeader header;
    if (auto error = parse_frame_header(header_, max_bytes_, header); !error.empty()) {
      return fail(prefix() + "malformed frame from " + name_ + " (" + remote_text(socket_) +
                  "): " + error);
    }
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
              if (!self->failed_.empty()) return;
              if (ec) {
                op.state->fail(self->prefix() + "receiving from " + self->name_ + " failed");
                return self->on_error(ec, "receiving");
              }
              op.state->complete(n);
              self->read_header();
            });
      }
      too_long(op, header.length);
      return stage(header, /*keep=*/false);
    }
    stage(header, /*keep=*/true);
  }

  // Reads the payload into a staging buffer (`keep`: queue it for a later receive).
  void stage(const FrameHeader& header, bool keep) {
    auto staged = std::make_shared<Staged>();
    staged->data.resize(header.length);
    if (keep) staged_[header.tag].push_back(staged);
    reading_ = staged;
    if (header.length == 0) return staged_done(staged);
    asio::async_read(socket_, asio::buffer(staged->data), large_transfers,
                     [self = shared_from_this(), staged](const error_code& ec, size_t) {
                       if (!self->failed_.empty()) return;
                       if (ec) return self->on_error(ec, "receiving");
                       self->staged_done(staged);
                     });
  }

  void staged_done(const std::shared_ptr<Staged>& staged) {
    staged->complete = true;
    reading_.reset();
    if (staged->waiter) {
      deliver(*staged, *staged->waiter);
      staged->waiter.reset();
    }
    read_header();
  }

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

// --- the context and its rendezvous ----------------------------------------------------------

class TcpContext final : public Context {
 public:
  explicit TcpContext(const Options& options)
      : options_(options),
        handshake_timeout_(
            std::min({options.timeout, options.start_timeout, std::chrono::milliseconds(10'000)})),
        work_(asio::make_work_guard(io_)),
        pairs_(static_cast<size_t>(options.size)),
        control_(static_cast<size_t>(options.size)) {
    thread_ = std::thread([this] {
      io_.run();
      std::lock_guard lock(stopped_mutex_);
      stopped_ = true;
      stopped_cv_.notify_all();
    });
  }

  ~TcpContext() override {
    asio::post(io_, [this] {
      close_all("threelc rank " + std::to_string(rank()) + ": the transport context was shut down");
    });
    work_.reset();
    {
      std::unique_lock lock(stopped_mutex_);
      if (!stopped_cv_.wait_for(lock, std::chrono::seconds(2), [this] { return stopped_; })) {
        io_.stop();  // something still waits; abandon it rather than hang
      }
    }
    thread_.join();
  }

  void run_rendezvous() {
    std::promise<void> done;
    auto future = done.get_future();
    asio::co_spawn(io_, rendezvous(), [&done](std::exception_ptr error) {
      if (error) {
        done.set_exception(error);
      } else {
        done.set_value();
      }
    });
    try {
      future.get();
    } catch (const Error&) {
      throw;
    } catch (const std::exception& e) {
      throw Error(-1, prefix() + "rendezvous failed: " + e.what());
    }
  }

  int rank() const override { return options_.rank; }
  int size() const override { return options_.size; }

  Pair& pair(int peer) override {
    check_peer(peer, "pair");
    return *pairs_[static_cast<size_t>(peer)];
  }

  Pair& control(int peer) override {
    if (rank() == 0) {
      check_peer(peer, "control");
    } else if (peer != 0) {
      throw Error(peer, "threelc rank " + std::to_string(rank()) +
                            ": control channels exist only to the coordinator (rank 0), not rank " +
                            std::to_string(peer));
    }
    return *control_[static_cast<size_t>(peer)];
  }

 private:
  void check_peer(int peer, const char* what) const {
    if (peer < 0 || peer >= size() || peer == rank()) {
      throw Error(peer, "threelc rank " + std::to_string(rank()) + ": no " + what +
                            " channel to rank " + std::to_string(peer) + " in a job of " +
                            std::to_string(size()) + " ranks");
    }
  }

  std::string prefix() const { return "threelc rank " + std::to_string(rank()) + ": "; }

  void log(const std::string& message) const {
    std::fprintf(stderr, "threelc: rank %d: %s\n", rank(), message.c_str());
  }

  void close_all(const std::string& message) {
    closing_ = true;
    error_code ec;
    control_acceptor_.close(ec);
    data_acceptor_.close(ec);
    auto pending = std::move(pending_);
    pending_.clear();
    for (auto& [id, watched] : pending) {
      watched.socket->close(ec);
      watched.timer->cancel();
    }
    if (wake_) wake_->cancel();
    for (auto& pair : pairs_) {
      if (pair) pair->fail(message);
    }
    for (auto& pair : control_) {
      if (pair) pair->fail(message);
    }
  }

  // A handshake socket, closed when its deadline passes or the context shuts down.
  struct Pending {
    std::shared_ptr<tcp::socket> socket;
    std::shared_ptr<asio::steady_timer> timer;
    std::shared_ptr<bool> timed_out;
  };

  Pending watch(std::shared_ptr<tcp::socket> socket) {
    return watch(std::move(socket), Clock::now() + handshake_timeout_);
  }

  Pending watch(std::shared_ptr<tcp::socket> socket, Clock::time_point deadline) {
    Pending pending{socket, std::make_shared<asio::steady_timer>(io_), std::make_shared<bool>()};
    const uint64_t id = next_pending_++;
    pending_.emplace(id, pending);
    pending.timer->expires_at(deadline);
    pending.timer->async_wait([this, id, socket, flag = pending.timed_out](const error_code& ec) {
      if (!ec) {
        *flag = true;
        error_code ignored;
        socket->close(ignored);
      }
      pending_.erase(id);
    });
    return pending;
  }

  // Server side of a handshake: returns the authenticated hello, or throws HandshakeError.
  asio::awaitable<Hello> serve_handshake(tcp::socket& socket, uint32_t kind,
                                         std::string& verdict_error) {
    const auto hello_bytes = co_await read_frame(socket, kTagHello, kMaxHandshakeFrame);
    Hello hello;
    if (!Hello::decode(hello_bytes, hello)) throw HandshakeError("malformed hello");
    if (hello.version != kProtocolVersion) {
      throw HandshakeError("protocol version " + std::to_string(hello.version) + " (expected " +
                           std::to_string(kProtocolVersion) + ")");
    }
    Writer challenge;
    challenge.u32(static_cast<uint32_t>(rank()));
    challenge.raw(random_nonce());
    co_await write_frame(socket, kTagChallenge, challenge.bytes);
    const auto proof_bytes = co_await read_frame(socket, kTagProof, sizeof(Mac));
    Mac received{};
    if (proof_bytes.size() != received.size()) throw HandshakeError("malformed proof");
    std::memcpy(received.data(), proof_bytes.data(), received.size());
    if (!macs_equal(received, proof(options_.secret, kClientLabel, hello_bytes, challenge.bytes))) {
      throw HandshakeError("authentication failed (claimed rank " + std::to_string(hello.rank) +
                           ")");
    }
    // Authenticated: now the claims may be judged and answered.
    if (hello.kind != kind) {
      verdict_error = "connected to the wrong listener";
    } else if (hello.size != size()) {
      verdict_error = "rank " + std::to_string(hello.rank) + " says the job has " +
                      std::to_string(hello.size) + " ranks, rank " + std::to_string(rank()) +
                      " says " + std::to_string(size());
    } else if (hello.rank <= (kind == kKindControl ? 0 : -1) || hello.rank >= size() ||
               (kind == kKindData && hello.rank >= rank())) {
      verdict_error = "rank " + std::to_string(hello.rank) + " is not expected here";
    } else if ((kind == kKindControl ? control_ : pairs_)[static_cast<size_t>(hello.rank)] ||
               (kind == kKindControl && arrived_.count(hello.rank))) {
      verdict_error = "rank " + std::to_string(hello.rank) + " is already connected";
    }
    Writer verdict;
    verdict.raw(proof(options_.secret, kServerLabel, hello_bytes, challenge.bytes));
    verdict.text(verdict_error);
    co_await write_frame(socket, kTagVerdict, verdict.bytes);
    if (!verdict_error.empty()) throw HandshakeError(verdict_error);
    co_return hello;
  }

  // Client side: authenticates to `who` and checks the server is `expected_rank`.
  asio::awaitable<void> client_handshake(tcp::socket& socket, uint32_t kind, int expected_rank,
                                         const std::string& who) {
    Hello hello;
    hello.kind = kind;
    hello.rank = rank();
    hello.size = size();
    hello.host = data_host_;
    hello.port = data_port_;
    hello.nonce = random_nonce();
    const auto hello_bytes = hello.encode();
    co_await write_frame(socket, kTagHello, hello_bytes);
    const auto challenge = co_await read_frame(socket, kTagChallenge, kMaxHandshakeFrame);
    Reader r{challenge};
    const int server_rank = static_cast<int>(r.u32());
    r.fixed<32>();
    if (!r.ok || r.at != challenge.size()) throw HandshakeError("malformed challenge");
    if (server_rank != expected_rank) {
      throw HandshakeError(who + " answered as rank " + std::to_string(server_rank));
    }
    const Mac mine = proof(options_.secret, kClientLabel, hello_bytes, challenge);
    co_await write_frame(socket, kTagProof, mine);
    std::vector<std::byte> verdict;
    try {
      verdict = co_await read_frame(socket, kTagVerdict, kMaxHandshakeFrame);
    } catch (const HandshakeError&) {
      throw Error(expected_rank, prefix() + who +
                                     " refused our authentication: is THREELC_SECRET the same "
                                     "on every rank?");
    }
    Reader v{verdict};
    const auto server_mac = v.fixed<32>();
    const std::string error = v.text(kMaxHandshakeFrame);
    if (!v.ok || v.at != verdict.size()) throw HandshakeError("malformed verdict");
    if (!macs_equal(server_mac, proof(options_.secret, kServerLabel, hello_bytes, challenge))) {
      throw Error(expected_rank,
                  prefix() + who + " failed to prove it knows THREELC_SECRET (wrong secret?)");
    }
    if (!error.empty())
      throw Error(expected_rank,
                  prefix() + who + " refused rank " + std::to_string(rank()) + ": " + error);
  }

  // Accepts on `acceptor` until it is closed; runs each handshake concurrently.
  asio::awaitable<void> accept_loop(tcp::acceptor& acceptor, uint32_t kind) {
    for (;;) {
      auto socket = std::make_shared<tcp::socket>(io_);
      error_code ec;
      co_await acceptor.async_accept(*socket, asio::redirect_error(asio::use_awaitable, ec));
      if (ec || closing_ || !acceptor.is_open()) co_return;
      asio::co_spawn(io_, serve_one(socket, kind), asio::detached);
    }
  }

  asio::awaitable<void> serve_one(std::shared_ptr<tcp::socket> socket, uint32_t kind) {
    const std::string remote = remote_text(*socket);
    auto pending = watch(socket);
    std::string verdict_error;
    try {
      Hello hello = co_await serve_handshake(*socket, kind, verdict_error);
      pending.timer->cancel();
      if (closing_ || !socket->is_open()) co_return;
      if (options_.debug) {
        log("accepted " + std::string(kind == kKindControl ? "control" : "data") +
            " connection from rank " + std::to_string(hello.rank) + " at " + remote);
      }
      if (kind == kKindControl) {
        if (arrived_.count(hello.rank) || control_[static_cast<size_t>(hello.rank)]) {
          log("dropped connection from " + remote + ": rank " + std::to_string(hello.rank) +
              " is already connected");
          co_return;
        }
        arrived_.emplace(hello.rank, Arrival{std::move(*socket), hello.host, hello.port});
        if (static_cast<int>(arrived_.size()) == size() - 1) wake_->cancel();
      } else {
        add_pair(hello.rank, std::move(*socket));
      }
    } catch (const std::exception& e) {
      pending.timer->cancel();
      if (closing_) co_return;
      std::string why = *pending.timed_out
                            ? "handshake timed out after " + seconds_text(handshake_timeout_)
                            : std::string(e.what());
      if (why.find("claimed rank") != std::string::npos)
        auth_failures_ += " " + why + " from " + remote + ";";
      log("dropped connection from " + remote + ": " + why);
      error_code ignored;
      socket->close(ignored);
    }
  }

  void add_pair(int peer, tcp::socket socket) {
    if (pairs_[static_cast<size_t>(peer)]) {
      log("dropped a second data connection from rank " + std::to_string(peer));
      return;
    }
    auto pair = std::make_shared<TcpPair>(std::move(socket), rank(), peer, false, options_);
    pairs_[static_cast<size_t>(peer)] = pair;
    pair->start();
    if (++connected_ == size() - 1) wake_->cancel();
  }

  // Connects to `endpoint`, retrying refused connections with exponential back-off until
  // `deadline`. Returns a connected socket or throws Error.
  asio::awaitable<std::shared_ptr<tcp::socket>> connect_with_retry(const std::string& host,
                                                                   uint16_t port,
                                                                   Clock::time_point deadline,
                                                                   int peer,
                                                                   const std::string& who) {
    auto backoff = std::chrono::milliseconds(20);
    std::string last = "no attempt";
    tcp::resolver resolver(io_);
    for (;;) {
      error_code ec;
      auto results = co_await resolver.async_resolve(host, std::to_string(port),
                                                     asio::redirect_error(asio::use_awaitable, ec));
      if (!ec) {
        auto socket = std::make_shared<tcp::socket>(io_);
        auto pending = watch(socket);
        co_await asio::async_connect(*socket, results,
                                     asio::redirect_error(asio::use_awaitable, ec));
        pending.timer->cancel();
        if (!ec) co_return socket;
      }
      last = ec.message();
      if (closing_) throw Error(peer, prefix() + "shut down while connecting to " + who);
      if (Clock::now() + backoff >= deadline) {
        throw Error(peer, prefix() + "could not connect to " + who + " at " + host + ":" +
                              std::to_string(port) + " within " +
                              seconds_text(options_.start_timeout) + ": " + last);
      }
      asio::steady_timer timer(io_);
      timer.expires_after(backoff);
      co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      backoff = std::min(backoff * 2, std::chrono::milliseconds(1000));
    }
  }

  // Waits until `done()` or `deadline`; wake_->cancel() re-checks early.
  asio::awaitable<bool> wait_until(Clock::time_point deadline, const std::function<bool()>& done) {
    while (!done()) {
      if (Clock::now() >= deadline) co_return false;
      wake_->expires_at(deadline);
      error_code ec;
      co_await wake_->async_wait(asio::redirect_error(asio::use_awaitable, ec));
    }
    co_return true;
  }

  std::string coordinator_text() const {
    return options_.coordinator_host + ":" + std::to_string(options_.coordinator_port);
  }

  void open_listener(tcp::acceptor& acceptor, const tcp::endpoint& endpoint, const char* what) {
    error_code ec;
    acceptor.open(endpoint.protocol(), ec);
    if (!ec) acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
    if (!ec) acceptor.bind(endpoint, ec);
    if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) {
      throw Error(-1, prefix() + "cannot listen for " + what + " on " + endpoint_text(endpoint) +
                          ": " + ec.message());
    }
  }

  void open_data_listener(const std::string& host) {
    error_code ec;
    auto address = asio::ip::make_address(host, ec);
    if (ec) throw Error(-1, prefix() + "data listener address '" + host + "': " + ec.message());
    open_listener(data_acceptor_, tcp::endpoint(address, 0), "data channels");
    data_host_ = address.to_string();
    data_port_ = data_acceptor_.local_endpoint().port();
    if (options_.debug) log("data listener on " + endpoint_text(data_acceptor_.local_endpoint()));
    asio::co_spawn(io_, accept_loop(data_acceptor_, kKindData), asio::detached);
  }

  asio::awaitable<void> rendezvous() {
    wake_ = std::make_unique<asio::steady_timer>(io_);
    if (size() == 1) co_return;
    const auto start = Clock::now();
    const auto deadline = start + options_.start_timeout;
    std::vector<std::pair<std::string, uint16_t>> table(static_cast<size_t>(size()));

    if (rank() == 0) {
      // The control listener on the coordinator's address (or any address if it is not ours).
      tcp::resolver resolver(io_);
      error_code ec;
      auto results = resolver.resolve(options_.coordinator_host,
                                      std::to_string(options_.coordinator_port), ec);
      if (ec || results.empty()) {
        throw Error(-1, prefix() + "cannot resolve the coordinator host '" +
                            options_.coordinator_host + "': " + ec.message());
      }
      tcp::endpoint endpoint = results.begin()->endpoint();
      try {
        open_listener(control_acceptor_, endpoint, "ranks");
      } catch (const Error&) {
        error_code ignored;
        control_acceptor_.close(ignored);
        open_listener(control_acceptor_, tcp::endpoint(endpoint.protocol(), endpoint.port()),
                      "ranks");
      }
      if (options_.debug) log("coordinator listening on " + coordinator_text());
      open_data_listener(resolve_listen_host(options_, endpoint.address().to_string()));
      table[0] = {data_host_, data_port_};
      asio::co_spawn(io_, accept_loop(control_acceptor_, kKindControl), asio::detached);

      const bool all = co_await wait_until(
          deadline, [this] { return static_cast<int>(arrived_.size()) == size() - 1; });
      error_code ignored;
      control_acceptor_.close(ignored);
      std::string failure;
      if (!all) {
        std::string missing;
        int count = 0;
        for (int r = 1; r < size(); ++r) {
          if (arrived_.count(r)) continue;
          missing += (count++ ? ", " : "") + std::to_string(r);
        }
        failure = prefix() + (count == 1 ? "rank " : "ranks ") + missing + " of " +
                  std::to_string(size()) + (count == 1 ? " never" : " never") +
                  " connected to the coordinator " + coordinator_text() + " within " +
                  seconds_text(options_.start_timeout);
        if (!auth_failures_.empty()) failure += " (dropped:" + auth_failures_ + ")";
      }
      Writer message;
      message.u32(failure.empty() ? 0 : 1);
      if (failure.empty()) {
        for (auto& [r, arrival] : arrived_)
          table[static_cast<size_t>(r)] = {arrival.host, arrival.port};
        for (auto& [host, port] : table) {
          message.text(host);
          message.u32(port);
        }
      } else {
        message.text(failure);
      }
      for (auto& [r, arrival] : arrived_) {
        co_await write_frame(arrival.socket, kTagTable, message.bytes);
      }
      if (!failure.empty()) throw Error(-1, failure);
      for (auto& [r, arrival] : arrived_) {
        control_[static_cast<size_t>(r)] =
            std::make_shared<TcpPair>(std::move(arrival.socket), 0, r, true, options_);
      }
      arrived_.clear();
    } else {
      const std::string who = "the coordinator " + coordinator_text();
      std::shared_ptr<tcp::socket> socket;
      for (;;) {
        socket = co_await connect_with_retry(options_.coordinator_host, options_.coordinator_port,
                                             deadline, 0, who);
        if (!data_acceptor_.is_open()) {
          // Default data address: the one this host uses to reach the coordinator.
          error_code ec;
          const auto local = socket->local_endpoint(ec);
          open_data_listener(resolve_listen_host(
              options_, ec ? std::string("127.0.0.1") : local.address().to_string()));
        }
        auto pending = watch(socket);
        try {
          co_await client_handshake(*socket, kKindControl, 0, who);
          pending.timer->cancel();
          break;
        } catch (const HandshakeError& e) {
          pending.timer->cancel();
          // A listener that closed on us before the handshake (e.g. not ready): retry.
          if (Clock::now() >= deadline) {
            throw Error(0, prefix() + "handshake with " + who + " failed: " + e.what());
          }
        }
      }
      // Wait for the address table (rank 0 sends it once every rank arrived, or the failure).
      auto pending = watch(socket, deadline + options_.start_timeout / 2 + std::chrono::seconds(5));
      std::vector<std::byte> bytes;
      try {
        bytes = co_await read_frame(*socket, kTagTable,
                                    64 * 1024 + static_cast<uint64_t>(size()) * 300);
      } catch (const HandshakeError& e) {
        throw Error(0,
                    prefix() + who +
                        (*pending.timed_out ? " did not start the job in time"
                                            : " ended the rendezvous: " + std::string(e.what())));
      }
      pending.timer->cancel();
      Reader r{bytes};
      if (r.u32() != 0) {
        throw Error(0, prefix() + "the coordinator reports: " + r.text(64 * 1024));
      }
      for (auto& [host, port] : table) {
        host = r.text(255);
        port = static_cast<uint16_t>(r.u32());
      }
      if (!r.ok || r.at != bytes.size()) throw Error(0, prefix() + "malformed address table");
      control_[0] = std::make_shared<TcpPair>(std::move(*socket), rank(), 0, true, options_);
    }

    // Data channels: every rank connects to the ranks above it and accepts from those below.
    const auto data_deadline = Clock::now() + options_.start_timeout;
    for (int peer = rank() + 1; peer < size(); ++peer) {
      asio::co_spawn(io_, connect_data(peer, table[static_cast<size_t>(peer)], data_deadline),
                     [this](std::exception_ptr error) {
                       if (!error) return;
                       try {
                         std::rethrow_exception(error);
                       } catch (const std::exception& e) {
                         if (data_error_.empty()) data_error_ = e.what();
                       }
                       wake_->cancel();
                     });
    }
    const bool all = co_await wait_until(
        data_deadline, [this] { return connected_ == size() - 1 || !data_error_.empty(); });
    error_code ignored;
    data_acceptor_.close(ignored);
    if (!data_error_.empty()) throw Error(-1, data_error_);
    if (!all) {
      std::string missing;
      for (int r = 0; r < size(); ++r) {
        if (r != rank() && !pairs_[static_cast<size_t>(r)]) {
          missing += (missing.empty() ? "" : ", ") + std::to_string(r);
        }
      }
      throw Error(-1, prefix() + "no data channel to rank(s) " + missing + " within " +
                          seconds_text(options_.start_timeout));
    }
    for (auto& pair : control_) {
      if (pair) pair->start();
    }
  }

  asio::awaitable<void> connect_data(int peer, std::pair<std::string, uint16_t> address,
                                     Clock::time_point deadline) {
    const std::string who = "rank " + std::to_string(peer) + " (data listener " + address.first +
                            ":" + std::to_string(address.second) + ")";
    auto socket = co_await connect_with_retry(address.first, address.second, deadline, peer, who);
    auto pending = watch(socket);
    try {
      co_await client_handshake(*socket, kKindData, peer, who);
    } catch (const HandshakeError& e) {
      throw Error(peer, prefix() + "handshake with " + who +
                            " failed: " + (*pending.timed_out ? "timed out" : e.what()));
    }
    pending.timer->cancel();
    if (closing_) co_return;
    add_pair(peer, std::move(*socket));
  }

  struct Arrival {
    tcp::socket socket;
    std::string host;
    uint16_t port;
  };

  const Options options_;
  const std::chrono::milliseconds handshake_timeout_;
  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  std::thread thread_;
  std::mutex stopped_mutex_;
  std::condition_variable stopped_cv_;
  bool stopped_ = false;

  // I/O-thread state.
  bool closing_ = false;
  tcp::acceptor control_acceptor_{io_};
  tcp::acceptor data_acceptor_{io_};
  std::string data_host_;
  uint16_t data_port_ = 0;
  std::map<uint64_t, Pending> pending_;
  uint64_t next_pending_ = 0;
  std::unique_ptr<asio::steady_timer> wake_;
  std::map<int, Arrival> arrived_;
  std::string auth_failures_;
  std::string data_error_;
  int connected_ = 0;
  std::vector<std::shared_ptr<TcpPair>> pairs_;
  std::vector<std::shared_ptr<TcpPair>> control_;
};

}  // namespace

std::unique_ptr<Context> connect_tcp(const Options& options) {
  auto context = std::make_unique<TcpContext>(options);
  context->run_rendezvous();
  return context;
}

}  // namespace threelc::transport::detail
