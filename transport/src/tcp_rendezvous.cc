// TcpContext's rendezvous: ranks meet at the coordinator, which hands out the table of data
// listeners; then every rank connects to the ranks above it and accepts from those below.
#include <poll.h>

#include <algorithm>
#include <string>
#include <vector>

#include "launcher_wireup.h"
#include "listen_address.h"
#include "payload_bytes.h"
#include "tcp_context.h"

namespace threelc::transport::detail {

namespace {

// How often the coordinator looks at the ranks that arrived while it waits for the others.
constexpr std::chrono::milliseconds kArrivalCheck{200};

// A rank that arrived sends nothing until the coordinator's table: its socket turning readable
// means it hung up (its process died or was stopped) or broke the protocol.
bool hung_up(tcp::socket& socket) {
  pollfd watched{socket.native_handle(), POLLIN | POLLRDHUP, 0};
  return ::poll(&watched, 1, 0) > 0;
}

}  // namespace

asio::awaitable<bool> TcpContext::wait_until(Clock::time_point deadline,
                                             const std::function<bool()>& done) {
  while (!done()) {
    if (Clock::now() >= deadline) co_return false;
    wake_->expires_at(deadline);
    error_code ec;
    co_await wake_->async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
  co_return true;
}

asio::awaitable<void> TcpContext::rendezvous() {
  wake_ = std::make_unique<asio::steady_timer>(io_);
  if (size() == 1) co_return;
  const auto deadline = Clock::now() + options_.start_timeout;
  AddressTable table(static_cast<size_t>(size()));
  if (rank() == 0) {
    co_await coordinate(table, deadline);
  } else {
    co_await join_coordinator(table, deadline);
  }
  co_await open_data_channels(table);
}

asio::awaitable<void> TcpContext::coordinate(AddressTable& table, Clock::time_point deadline) {
  // The control listener on the coordinator's address (or any address if it is not ours).
  tcp::resolver resolver(io_);
  error_code ec;
  auto results =
      resolver.resolve(options_.coordinator_host, std::to_string(options_.coordinator_port), ec);
  if (ec || results.empty()) {
    throw Error(-1, prefix() + "cannot resolve the coordinator host '" + options_.coordinator_host +
                        "': " + ec.message());
  }
  tcp::endpoint endpoint = results.begin()->endpoint();
  try {
    open_listener(control_acceptor_, endpoint, "ranks");
  } catch (const Error&) {
    error_code ignored;
    control_acceptor_.close(ignored);
    open_listener(control_acceptor_, tcp::endpoint(endpoint.protocol(), endpoint.port()), "ranks");
  }
  if (!options_.wireup.empty()) {
    // The port the system picked, published through the launcher's service: the ranks that
    // connect before the accept loop starts wait in the listener's backlog.
    options_.coordinator_port = control_acceptor_.local_endpoint().port();
    publish_through_launcher(options_);
  }
  if (options_.debug) log("coordinator listening on " + coordinator_text());
  open_data_listener(resolve_listen_host(options_, endpoint.address().to_string()));
  table[0] = {data_host_, data_port_};
  asio::co_spawn(io_, accept_loop(control_acceptor_, kKindControl), asio::detached);
  co_await send_table(table, co_await await_arrivals(deadline));
}

asio::awaitable<std::string> TcpContext::await_arrivals(Clock::time_point deadline) {
  // Waits for every rank; one that arrived and hung up fails the job now, naming it.
  const auto everyone = [this] { return static_cast<int>(arrived_.size()) == size() - 1; };
  std::string failure;
  while (!everyone() && failure.empty() && Clock::now() < deadline) {
    co_await wait_until(std::min(deadline, Clock::now() + kArrivalCheck), everyone);
    for (auto it = arrived_.begin(); it != arrived_.end(); ++it) {
      if (!hung_up(it->second.socket)) continue;
      failure = prefix() + "rank " + std::to_string(it->first) +
                " connected to the coordinator, then closed its connection during start-up "
                "(its process died or was stopped)";
      arrived_.erase(it);
      break;
    }
  }
  error_code ignored;
  control_acceptor_.close(ignored);
  if (failure.empty() && !everyone()) {
    std::string missing;
    int count = 0;
    for (int r = 1; r < size(); ++r) {
      if (arrived_.count(r)) continue;
      missing += (count++ ? ", " : "") + std::to_string(r);
    }
    failure = prefix() + (count == 1 ? "rank " : "ranks ") + missing + " of " +
              std::to_string(size()) + " never" + " connected to the coordinator " +
              coordinator_text() + " within " + seconds_text(options_.start_timeout);
    if (!auth_failures_.empty()) failure += " (dropped:" + auth_failures_ + ")";
  }
  co_return failure;
}

asio::awaitable<void> TcpContext::send_table(AddressTable& table, const std::string& failure) {
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
  // Every rank that arrived gets the table or the failure, even when one of them is gone.
  int unreachable = -1;
  for (auto& [r, arrival] : arrived_) {
    try {
      co_await write_frame(arrival.socket, kTagTable, message.bytes);
    } catch (const std::exception&) {
      unreachable = r;
    }
  }
  if (!failure.empty()) throw Error(-1, failure);
  if (unreachable >= 0) {
    throw Error(unreachable, prefix() + "rank " + std::to_string(unreachable) +
                                 " closed its connection to the coordinator during start-up, "
                                 "before it got the address table");
  }
  for (auto& [r, arrival] : arrived_) {
    control_[static_cast<size_t>(r)] =
        std::make_shared<TcpPair>(std::move(arrival.socket), 0, r, true, options_, pair_links());
  }
  arrived_.clear();
}

asio::awaitable<void> TcpContext::join_coordinator(AddressTable& table,
                                                   Clock::time_point deadline) {
  const std::string who = "the coordinator (rank 0) " + coordinator_text();
  std::shared_ptr<tcp::socket> socket;
  for (;;) {
    socket = co_await connect_with_retry(options_.coordinator_host, options_.coordinator_port,
                                         deadline, 0, who);
    if (data_host_.empty()) {
      // Default data address: the one this host uses to reach the coordinator.
      error_code ec;
      const auto local = socket->local_endpoint(ec);
      open_data_listener(resolve_listen_host(
          options_, ec ? std::string("127.0.0.1") : local.address().to_string()));
    }
    auto pending = watch(socket);
    try {
      co_await client_handshake(*socket, handshake_self(), kKindControl, data_host_, data_port_, 0,
                                who);
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
                                uint64_t{64} * 1024 + static_cast<uint64_t>(size()) * 300);
  } catch (const HandshakeError& e) {
    throw Error(0, prefix() + who +
                       (*pending.timed_out ? " did not start the job in time"
                                           : " ended the rendezvous: " + std::string(e.what())));
  }
  pending.timer->cancel();
  Reader r{bytes};
  if (r.u32() != 0) {
    throw Error(0, prefix() + "the coordinator reports: " + r.text(size_t{64} * 1024));
  }
  for (auto& [host, port] : table) {
    host = r.text(255);
    port = static_cast<uint16_t>(r.u32());
  }
  if (!r.ok || r.at != bytes.size()) throw Error(0, prefix() + "malformed address table");
  control_[0] =
      std::make_shared<TcpPair>(std::move(*socket), rank(), 0, true, options_, pair_links());
}

asio::awaitable<void> TcpContext::open_data_channels(const AddressTable& table) {
  // Data channels: every rank connects to the ranks above it and accepts from those below.
  // Without them (TcpChannels::kControlOnly) the table's ports are 0.
  if (!data_channels_) {
    for (auto& pair : control_) {
      if (pair) pair->start();
    }
    co_return;
  }
  const auto data_deadline = Clock::now() + options_.start_timeout;
  for (int peer = rank() + 1; peer < size(); ++peer) {
    asio::co_spawn(io_, connect_data(peer, table[static_cast<size_t>(peer)], data_deadline),
                   [this](const std::exception_ptr& error) {
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

asio::awaitable<void> TcpContext::connect_data(int peer, std::pair<std::string, uint16_t> address,
                                               Clock::time_point deadline) {
  const std::string who = "rank " + std::to_string(peer) + " (data listener " + address.first +
                          ":" + std::to_string(address.second) + ")";
  // The peer listened before it sent this address to the coordinator: a refused connection
  // means it is gone, so there is no retrying (one attempt, bounded like a handshake).
  error_code ec;
  const tcp::endpoint endpoint(asio::ip::make_address(address.first, ec), address.second);
  if (ec) throw Error(peer, prefix() + "bad address of " + who + ": " + ec.message());
  auto socket = std::make_shared<tcp::socket>(io_);
  auto pending = watch(socket, std::min(deadline, Clock::now() + handshake_timeout_));
  co_await socket->async_connect(endpoint, asio::redirect_error(asio::use_awaitable, ec));
  if (ec) {
    pending.timer->cancel();
    throw Error(peer, prefix() + "cannot connect to " + who + " during start-up: " +
                          (*pending.timed_out ? "timed out" : ec.message()) + " (rank " +
                          std::to_string(peer) + " listened there: it has died or stopped)");
  }
  try {
    co_await client_handshake(*socket, handshake_self(), kKindData, data_host_, data_port_, peer,
                              who);
  } catch (const HandshakeError& e) {
    throw Error(peer, prefix() + "handshake with " + who +
                          " failed: " + (*pending.timed_out ? "timed out" : e.what()));
  }
  pending.timer->cancel();
  if (closing_) co_return;
  add_pair(peer, std::move(*socket));
}

}  // namespace threelc::transport::detail
