// UcxContext's setup and teardown: the worker-address exchange over the control channels, the
// endpoints, and their close.
#include "ucx_context.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>

#include "listen_address.h"
#include "payload_bytes.h"
#include "tcp.h"
#include "ucx.h"

namespace threelc::transport::detail {

namespace {

using Clock = std::chrono::steady_clock;

// Control-channel tags of the address exchange (docs/WIRE_FORMAT.md); far from the engine's
// (0x10, 0x11) and the tests' small ones.
constexpr uint32_t kTagUcxAddress = 0x55435801;    // rank -> 0: its worker address
constexpr uint32_t kTagUcxTableSize = 0x55435802;  // 0 -> rank: u32 bytes of the table
constexpr uint32_t kTagUcxTable = 0x55435803;      // 0 -> rank: every address, or the failure
constexpr size_t kMaxAddressBytes = size_t{64} * 1024;
// How long teardown waits for the endpoints' flush before it destroys the worker anyway.
constexpr std::chrono::milliseconds kCloseLimit{2000};

std::span<const std::byte> as_span(const std::vector<std::byte>& bytes) { return bytes; }

}  // namespace

UcxContext::UcxContext(const Options& options, std::unique_ptr<Context> bootstrap,
                       TcpContextLinks links)
    : options_(options),
      bootstrap_(std::move(bootstrap)),
      links_(std::move(links)),
      pairs_(static_cast<size_t>(options.size)) {
  UcxWorkerOptions worker_options{prefix(), options.size - 1, {}};
  if (!options.listen_host.empty()) {
    worker_options.interface = resolve_interface_name(options.listen_host);
  }
  worker_ = std::make_unique<UcxWorker>(worker_options);
  if (links_.on_notice) {
    links_.on_notice->set([this](int peer, const std::string& reason) {
      worker_->post([this, peer, reason] { on_stop_notice(peer, reason, /*except=*/-1); });
    });
  }
}

UcxContext::~UcxContext() {
  if (links_.on_notice) links_.on_notice->set(nullptr);
  if (worker_) close_pairs();
  worker_.reset();
  pairs_.clear();
  bootstrap_.reset();
}

void UcxContext::stop(const std::string& reason) {
  if (worker_) {
    worker_->run(
        [this, reason] {
          for (auto& pair : pairs_) {
            if (pair) pair->close(reason, /*notice=*/true);
          }
        },
        kCloseLimit);
  }
  bootstrap_->stop(reason);
}

void UcxContext::on_stop_notice(int peer, const std::string& reason, int except) {
  const std::string message = prefix() + "rank " + std::to_string(peer) + " stopped: " + reason;
  if (relaying_) return;
  relaying_ = true;
  for (auto& pair : pairs_) {
    if (pair && pair->peer() != except) pair->close(message, /*notice=*/true);
  }
}

Pair& UcxContext::pair(int peer) {
  if (peer < 0 || peer >= size() || peer == rank() || !pairs_[static_cast<size_t>(peer)]) {
    throw Error(peer, prefix() + "no pair channel to rank " + std::to_string(peer) +
                          " in a job of " + std::to_string(size()) + " ranks");
  }
  return *pairs_[static_cast<size_t>(peer)];
}

void UcxContext::log(const std::string& message) const {
  std::fprintf(stderr, "threelc: rank %d: %s\n", rank(), message.c_str());
}

void UcxContext::connect_pairs() {
  if (size() == 1) return;
  // Shared with the task below, which may outlive this call if the progress thread stalls.
  const auto addresses =
      std::make_shared<const std::vector<std::vector<std::byte>>>(exchange_addresses());
  for (int peer = 0; peer < size(); ++peer) {
    if (peer == rank()) continue;
    pairs_[static_cast<size_t>(peer)] = std::make_shared<UcxPair>(
        *worker_, rank(), peer, options_,
        UcxPair::Links{
            [this](int from, const std::string& reason) { on_stop_notice(from, reason, from); },
            links_.waits});
  }
  // Endpoints are made on the progress thread, the only one that touches the worker.
  auto errors = std::make_shared<std::vector<std::pair<int, std::string>>>();
  const bool ran = worker_->run(
      [this, errors, addresses] {
        for (int peer = 0; peer < size(); ++peer) {
          if (peer == rank()) continue;
          auto& pair = *pairs_[static_cast<size_t>(peer)];
          auto error = pair.open((*addresses)[static_cast<size_t>(peer)]);
          if (!error.empty()) errors->emplace_back(peer, error);
          if (options_.debug) pair.print_info();
        }
      },
      options_.timeout);
  if (!ran) throw Error(-1, prefix() + "UCX: creating the endpoints did not finish in time");
  if (!errors->empty()) throw Error(errors->front().first, errors->front().second);
  if (options_.debug) {
    log("UCX data channels to " + std::to_string(size() - 1) + " ranks (worker address " +
        std::to_string(worker_->address().size()) + " bytes)");
  }
}

std::vector<std::vector<std::byte>> UcxContext::exchange_addresses() {
  if (worker_->address().size() > kMaxAddressBytes) {
    throw Error(-1, prefix() + "UCX worker address of " +
                        std::to_string(worker_->address().size()) + " bytes exceeds " +
                        std::to_string(kMaxAddressBytes) + " (narrow UCX_TLS / UCX_NET_DEVICES)");
  }
  if (rank() == 0) return collect_addresses();

  Pair& coordinator = bootstrap_->control(0);
  coordinator.send(kTagUcxAddress, worker_->address()).wait();
  std::byte size_bytes[4];
  coordinator.recv(kTagUcxTableSize, size_bytes).wait();
  Reader size_reader{size_bytes};
  std::vector<std::byte> table(size_reader.u32());
  const size_t got = coordinator.recv(kTagUcxTable, table).wait();
  Reader r{std::span<const std::byte>(table.data(), got)};
  if (r.u32() != 0) {
    throw Error(0, prefix() + "the coordinator reports: " + r.text(size_t{64} * 1024));
  }
  std::vector<std::vector<std::byte>> addresses(static_cast<size_t>(size()));
  for (auto& address : addresses) {
    const std::string bytes = r.text(kMaxAddressBytes);
    const auto* data = reinterpret_cast<const std::byte*>(bytes.data());
    address.assign(data, data + bytes.size());
  }
  if (!r.ok || r.at != got) throw Error(0, prefix() + "malformed UCX address table");
  return addresses;
}

std::vector<std::vector<std::byte>> UcxContext::collect_addresses() {
  std::vector<std::vector<std::byte>> addresses(static_cast<size_t>(size()));
  addresses[0] = worker_->address();
  std::vector<std::vector<std::byte>> buffers(static_cast<size_t>(size()));
  std::vector<Request> requests(static_cast<size_t>(size()));
  for (int peer = 1; peer < size(); ++peer) {
    buffers[static_cast<size_t>(peer)].resize(kMaxAddressBytes);
    requests[static_cast<size_t>(peer)] =
        bootstrap_->control(peer).recv(kTagUcxAddress, buffers[static_cast<size_t>(peer)]);
  }
  std::string failure;
  int failed_peer = -1;
  for (int peer = 1; peer < size(); ++peer) {
    try {
      const size_t n = requests[static_cast<size_t>(peer)].wait();
      auto& buffer = buffers[static_cast<size_t>(peer)];
      addresses[static_cast<size_t>(peer)].assign(buffer.begin(),
                                                  buffer.begin() + static_cast<ptrdiff_t>(n));
    } catch (const Error& e) {
      if (failure.empty()) {
        failure =
            prefix() + "no UCX worker address from rank " + std::to_string(peer) + ": " + e.what();
        failed_peer = peer;
      }
    }
  }
  Writer table;
  table.u32(failure.empty() ? 0 : 1);
  if (failure.empty()) {
    for (const auto& address : addresses) {
      table.u32(static_cast<uint32_t>(address.size()));
      table.raw(address);
    }
  } else {
    table.text(failure);
  }
  Writer size_message;
  size_message.u32(static_cast<uint32_t>(table.bytes.size()));
  std::vector<Request> sends;
  for (int peer = 1; peer < size(); ++peer) {
    if (peer == failed_peer) continue;
    sends.push_back(bootstrap_->control(peer).send(kTagUcxTableSize, as_span(size_message.bytes)));
    sends.push_back(bootstrap_->control(peer).send(kTagUcxTable, as_span(table.bytes)));
  }
  for (auto& send : sends) {
    try {
      send.wait();
    } catch (const Error& e) {
      if (failure.empty()) throw;
    }
  }
  if (!failure.empty()) throw Error(failed_peer, failure);
  return addresses;
}

void UcxContext::close_pairs() {
  const std::string message = prefix() + "the transport context was shut down";
  // Tasks capture only what outlives worker_->stop(), which runs whatever is still queued.
  const bool started = worker_->run(
      [this, &message] {
        for (auto& pair : pairs_) {
          if (pair) pair->close(message);
        }
      },
      kCloseLimit);
  const auto deadline = Clock::now() + kCloseLimit;
  bool closed = !started;
  while (!closed && Clock::now() < deadline) {
    const bool answered = worker_->run(
        [this, &closed] {
          closed = std::all_of(pairs_.begin(), pairs_.end(),
                               [](const auto& pair) { return !pair || pair->closed(); });
        },
        kCloseLimit);
    if (!answered) break;
    if (!closed) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  if (!closed) {
    if (options_.debug) log("UCX endpoints did not close within 2 s; destroying them");
    // A peer that never said goodbye (stalled): its goodbye's receive is canceled and the
    // endpoint force-closed, so that UCX gets every request back before the worker goes.
    worker_->run(
        [this, &message] {
          for (auto& pair : pairs_) {
            if (pair && !pair->closed()) pair->fail(message);
          }
        },
        kCloseLimit);
  }
  worker_->stop();
}

std::unique_ptr<Context> connect_ucx(const Options& options) {
  const TcpContextLinks links{std::make_shared<WaitRegistry>(), std::make_shared<StopListener>()};
  auto context = std::make_unique<UcxContext>(
      options, connect_tcp(options, TcpChannels::kControlOnly, links), links);
  context->connect_pairs();
  return context;
}

}  // namespace threelc::transport::detail
