// TcpContext's lifetime and connection setup: the I/O thread, shutdown, listeners, the accept loop
// with a deadline per handshake, connecting with back-off, and pairs as they are made.
#include "tcp_context.h"

#include <algorithm>
#include <cstdio>
#include <exception>
#include <future>

#include "host_address.h"
#include "rank_prefix.h"
#include "tcp.h"

namespace threelc::transport::detail {

TcpContext::TcpContext(const Options& options, bool data_channels, TcpContextLinks links)
    : options_(options),
      data_channels_(data_channels),
      links_(std::move(links)),
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

TcpContext::~TcpContext() {
  asio::post(io_,
             [this] { close_all(rank_prefix(rank()) + "the transport context was shut down"); });
  work_.reset();
  {
    std::unique_lock lock(stopped_mutex_);
    if (!stopped_cv_.wait_for(lock, std::chrono::seconds(2), [this] { return stopped_; })) {
      io_.stop();  // something still waits; abandon it rather than hang
    }
  }
  thread_.join();
}

void TcpContext::run_rendezvous() {
  std::promise<void> done;
  auto future = done.get_future();
  asio::co_spawn(io_, rendezvous(), [&done](const std::exception_ptr& error) {
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

Pair& TcpContext::pair(int peer) {
  if (!data_channels_) {
    throw Error(peer, prefix() +
                          "this TCP context carries control channels only (the bootstrap "
                          "of another transport); no data channel to rank " +
                          std::to_string(peer));
  }
  check_peer(peer, "pair");
  return *pairs_[static_cast<size_t>(peer)];
}

Pair& TcpContext::control(int peer) {
  if (rank() == 0) {
    check_peer(peer, "control");
  } else if (peer != 0) {
    throw Error(peer, rank_prefix(rank()) +
                          "control channels exist only to the coordinator (rank 0), not rank " +
                          std::to_string(peer));
  }
  return *control_[static_cast<size_t>(peer)];
}

std::vector<Request> TcpContext::send_stop_notices(const std::string& reason, int except) {
  std::vector<Request> notices;
  for (auto* channels : {&pairs_, &control_}) {
    for (auto& pair : *channels) {
      if (pair && pair->peer() != except) notices.push_back(pair->send_stop_notice(reason));
    }
  }
  return notices;
}

void TcpContext::stop(const std::string& reason) {
  std::vector<Request> notices = send_stop_notices(reason, /*except=*/-1);
  const auto deadline = Clock::now() + std::chrono::seconds(1);
  for (Request& notice : notices) {
    while (!notice.done() && Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
  // Closed on the I/O thread; once that ran, nothing touches the callers' buffers.
  auto closed = std::make_shared<std::promise<void>>();
  auto future = closed->get_future();
  asio::post(io_, [this, reason, closed] {
    close_all(reason);
    closed->set_value();
  });
  future.wait_for(std::chrono::seconds(2));
}

void TcpContext::on_stop_notice(int peer, const std::string& reason) {
  const std::string message = prefix() + "rank " + std::to_string(peer) + " stopped: " + reason;
  if (relaying_) return;  // relaying the first one already
  relaying_ = true;
  if (links_.on_notice) (*links_.on_notice)(peer, reason);
  // Relayed to every other peer before the channels close: a peer that sees this rank's
  // connections close has the cause first, on the same stream.
  auto relays = std::make_shared<std::vector<Request>>(send_stop_notices(message, peer));
  asio::co_spawn(io_, close_after(relays, message), asio::detached);
}

asio::awaitable<void> TcpContext::close_after(std::shared_ptr<std::vector<Request>> relays,
                                              std::string message) {
  const auto deadline = Clock::now() + std::chrono::seconds(1);
  asio::steady_timer timer(io_);
  while (Clock::now() < deadline && !closing_ &&
         !std::all_of(relays->begin(), relays->end(), [](const Request& r) { return r.done(); })) {
    timer.expires_after(std::chrono::milliseconds(2));
    error_code ec;
    co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
  if (!closing_) close_all(message);
}

void TcpContext::check_peer(int peer, const char* what) const {
  if (peer < 0 || peer >= size() || peer == rank()) {
    throw Error(peer, rank_prefix(rank()) + "no " + what + " channel to rank " +
                          std::to_string(peer) + " in a job of " + std::to_string(size()) +
                          " ranks");
  }
}

void TcpContext::log(const std::string& message) const {
  std::fprintf(stderr, "threelc: rank %d: %s\n", rank(), message.c_str());
}

void TcpContext::close_all(const std::string& message) {
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

TcpContext::Pending TcpContext::watch(const std::shared_ptr<tcp::socket>& socket) {
  return watch(socket, Clock::now() + handshake_timeout_);
}

TcpContext::Pending TcpContext::watch(const std::shared_ptr<tcp::socket>& socket,
                                      Clock::time_point deadline) {
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

asio::awaitable<void> TcpContext::accept_loop(tcp::acceptor& acceptor, uint32_t kind) {
  for (;;) {
    auto socket = std::make_shared<tcp::socket>(io_);
    error_code ec;
    co_await acceptor.async_accept(*socket, asio::redirect_error(asio::use_awaitable, ec));
    if (ec || closing_ || !acceptor.is_open()) co_return;
    asio::co_spawn(io_, serve_one(socket, kind), asio::detached);
  }
}

asio::awaitable<void> TcpContext::serve_one(std::shared_ptr<tcp::socket> socket, uint32_t kind) {
  const std::string remote = remote_text(*socket);
  auto pending = watch(socket);
  std::string verdict_error;
  try {
    const auto already_connected = [this, kind](int r) {
      return (kind == kKindControl ? control_ : pairs_)[static_cast<size_t>(r)] ||
             (kind == kKindControl && arrived_.count(r));
    };
    Hello hello =
        co_await serve_handshake(*socket, handshake_self(), kind, already_connected, verdict_error);
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

void TcpContext::add_pair(int peer, tcp::socket socket) {
  if (pairs_[static_cast<size_t>(peer)]) {
    log("dropped a second data connection from rank " + std::to_string(peer));
    return;
  }
  auto pair =
      std::make_shared<TcpPair>(std::move(socket), rank(), peer, false, options_, pair_links());
  pairs_[static_cast<size_t>(peer)] = pair;
  pair->start();
  if (++connected_ == size() - 1) wake_->cancel();
}

asio::awaitable<std::shared_ptr<tcp::socket>> TcpContext::connect_with_retry(
    const std::string& host, uint16_t port, Clock::time_point deadline, int peer,
    const std::string& who) {
  auto backoff = std::chrono::milliseconds(20);
  std::string last = "no attempt";
  // Built once, outside the loop: what a give-up says before the last error.
  const std::string give_up = prefix() + "could not connect to " + who + " at " + host + ":" +
                              std::to_string(port) + " within " +
                              seconds_text(options_.start_timeout) + ": ";
  tcp::resolver resolver(io_);
  for (;;) {
    error_code ec;
    auto results = co_await resolver.async_resolve(host, std::to_string(port),
                                                   asio::redirect_error(asio::use_awaitable, ec));
    if (!ec) {
      auto socket = std::make_shared<tcp::socket>(io_);
      auto pending = watch(socket);
      co_await asio::async_connect(*socket, results, asio::redirect_error(asio::use_awaitable, ec));
      pending.timer->cancel();
      if (!ec) co_return socket;
    }
    last = ec.message();
    if (closing_) throw Error(peer, prefix() + "shut down while connecting to " + who);
    if (Clock::now() + backoff >= deadline) {
      throw Error(peer, give_up + last);
    }
    asio::steady_timer timer(io_);
    timer.expires_after(backoff);
    co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    backoff = std::min(backoff * 2, std::chrono::milliseconds(1000));
  }
}

void TcpContext::open_listener(tcp::acceptor& acceptor, const tcp::endpoint& endpoint,
                               const char* what) {
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

std::string TcpContext::coordinator_text() const {
  return host_port_text(options_.coordinator_host, options_.coordinator_port);
}

void TcpContext::open_data_listener(const std::string& host) {
  error_code ec;
  auto address = asio::ip::make_address(host, ec);
  if (ec) throw Error(-1, prefix() + "data listener address '" + host + "': " + ec.message());
  data_host_ = address.to_string();
  if (!data_channels_) return;  // control only: the address still travels, with port 0
  open_listener(data_acceptor_, tcp::endpoint(address, 0), "data channels");
  data_port_ = data_acceptor_.local_endpoint().port();
  if (options_.debug) log("data listener on " + endpoint_text(data_acceptor_.local_endpoint()));
  asio::co_spawn(io_, accept_loop(data_acceptor_, kKindData), asio::detached);
}

std::unique_ptr<Context> connect_tcp(const Options& options, TcpChannels channels,
                                     TcpContextLinks links) {
  if (!links.waits) links.waits = std::make_shared<WaitRegistry>();
  auto context =
      std::make_unique<TcpContext>(options, channels == TcpChannels::kAll, std::move(links));
  try {
    context->run_rendezvous();
  } catch (const Error& e) {
    context->stop(e.what());  // the peers connected so far learn the cause
    throw;
  }
  return context;
}

}  // namespace threelc::transport::detail
