// TcpContext: one I/O thread, the listeners and accept loops, the watched handshake sockets, and
// the pairs. tcp_context.cc holds connection setup and shutdown; tcp_rendezvous.cc the rendezvous.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "rank_prefix.h"
#include "tcp.h"
#include "tcp_handshake.h"
#include "tcp_pair.h"
#include "tcp_socket.h"
#include "threelc/transport/transport.h"

namespace threelc::transport::detail {

class TcpContext final : public Context {
 public:
  // `data_channels`: false opens no data listener and no data channels (TcpChannels).
  // `links.waits`: this rank's waits, which the pairs answer peers' wait queries from.
  TcpContext(const Options& options, bool data_channels, TcpContextLinks links);
  ~TcpContext() override;

  // Runs the rendezvous on the I/O thread and waits for it; throws Error.
  void run_rendezvous();

  int rank() const override { return options_.rank; }
  int size() const override { return options_.size; }
  Pair& pair(int peer) override;
  Pair& control(int peer) override;
  void stop(const std::string& reason) override;

 private:
  // A handshake socket, closed when its deadline passes or the context shuts down.
  struct Pending {
    std::shared_ptr<tcp::socket> socket;
    std::shared_ptr<asio::steady_timer> timer;
    std::shared_ptr<bool> timed_out;
  };
  // A rank that completed its control handshake with the coordinator, and its data listener.
  struct Arrival {
    tcp::socket socket;
    std::string host;
    uint16_t port;
  };

  void check_peer(int peer, const char* what) const;
  std::string prefix() const { return rank_prefix(rank()); }
  void log(const std::string& message) const;
  // host:port, [v6-address]:port.
  std::string coordinator_text() const;
  HandshakeSelf handshake_self() const { return {rank(), size(), options_.secret}; }
  void close_all(const std::string& message);
  // A stop notice on every data and control channel but those to `except` (-1: none).
  std::vector<Request> send_stop_notices(const std::string& reason, int except);
  // A peer's stop notice (I/O thread): recorded, relayed to the other peers, and then (once
  // the relays are written, within a second) every channel fails with it.
  void on_stop_notice(int peer, const std::string& reason);
  asio::awaitable<void> close_after(std::shared_ptr<std::vector<Request>> relays,
                                    std::string message);
  TcpPair::Links pair_links() {
    return {[this](int peer, const std::string& reason) { on_stop_notice(peer, reason); },
            links_.waits};
  }

  // --- connection setup (tcp_context.cc) ---
  Pending watch(const std::shared_ptr<tcp::socket>& socket);
  Pending watch(const std::shared_ptr<tcp::socket>& socket, Clock::time_point deadline);
  // Accepts on `acceptor` until it is closed; runs each handshake concurrently.
  asio::awaitable<void> accept_loop(tcp::acceptor& acceptor, uint32_t kind);
  asio::awaitable<void> serve_one(std::shared_ptr<tcp::socket> socket, uint32_t kind);
  void add_pair(int peer, tcp::socket socket);
  // Connects to `host:port`, retrying refused connections with exponential back-off until
  // `deadline`. Returns a connected socket or throws Error.
  asio::awaitable<std::shared_ptr<tcp::socket>> connect_with_retry(const std::string& host,
                                                                   uint16_t port,
                                                                   Clock::time_point deadline,
                                                                   int peer,
                                                                   const std::string& who);
  void open_listener(tcp::acceptor& acceptor, const tcp::endpoint& endpoint, const char* what);
  // Records the data address (THREELC_IFACE checked) and, unless the context carries control
  // channels only, listens there (data_port_); otherwise data_port_ stays 0.
  void open_data_listener(const std::string& host);

  // --- the rendezvous (tcp_rendezvous.cc) ---
  // Every rank's data listener, by rank.
  using AddressTable = std::vector<std::pair<std::string, uint16_t>>;
  asio::awaitable<void> rendezvous();
  // Rank 0: the control listener, the data listener, then every rank's arrival; fills `table`.
  asio::awaitable<void> coordinate(AddressTable& table, Clock::time_point deadline);
  // Rank 0: waits for every rank to arrive; the failure that ends the job, or "".
  asio::awaitable<std::string> await_arrivals(Clock::time_point deadline);
  // Rank 0: sends every arrived rank the table or `failure`, then keeps their control pairs.
  asio::awaitable<void> send_table(AddressTable& table, const std::string& failure);
  // Ranks > 0: joins the coordinator and reads the table from it.
  asio::awaitable<void> join_coordinator(AddressTable& table, Clock::time_point deadline);
  // Every rank: connects to the ranks above it and accepts from those below, then starts the
  // control pairs.
  asio::awaitable<void> open_data_channels(const AddressTable& table);
  asio::awaitable<void> connect_data(int peer, std::pair<std::string, uint16_t> address,
                                     Clock::time_point deadline);
  // Waits until `done()` or `deadline`; wake_->cancel() re-checks early.
  asio::awaitable<bool> wait_until(Clock::time_point deadline, const std::function<bool()>& done);

  Options options_;  // rank 0 through a launcher's service: the port is the listener's
  const bool data_channels_;
  const TcpContextLinks links_;
  const std::chrono::milliseconds handshake_timeout_;
  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  std::thread thread_;
  std::mutex stopped_mutex_;
  std::condition_variable stopped_cv_;
  bool stopped_ = false;

  // I/O-thread state.
  bool relaying_ = false;  // a peer's stop notice arrived: relaying it (the first one only)
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

}  // namespace threelc::transport::detail
