// UcxContext: THREELC_TRANSPORT=ucx. The rendezvous and the control channels are a TcpContext
// that opens no data channels (TcpChannels::kControlOnly), authenticated as for tcp; the data
// channels are UcxPairs, one endpoint per peer on this rank's one UcxWorker. The workers'
// addresses travel over the control channels (docs/WIRE_FORMAT.md). Teardown needs no barrier:
// each pair sends its peer a goodbye after its last message and flushes the endpoint before it
// closes it, so whatever was sent arrives, and a peer that still waits for this rank fails at
// once (as on TCP's end of file) instead of at THREELC_TIMEOUT.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "rank_prefix.h"
#include "tcp.h"
#include "threelc/transport/transport.h"
#include "ucx_pair.h"
#include "ucx_worker.h"

namespace threelc::transport::detail {

class UcxContext final : public Context {
 public:
  // `links`: those given to the bootstrap (this rank's waits; the stop notices that arrive on
  // the control channels, which fail the UCX pairs too).
  UcxContext(const Options& options, std::unique_ptr<Context> bootstrap, TcpContextLinks links);
  // Every pair's goodbye, every endpoint closed after a flush (bounded: kCloseLimit), the
  // progress thread stopped, the worker and the ucp context destroyed, and last the control
  // channels.
  ~UcxContext() override;

  // Exchanges the worker addresses through rank 0 and creates an endpoint to every peer.
  // Throws Error naming the rank that failed or cannot be reached.
  void connect_pairs();

  int rank() const override { return options_.rank; }
  int size() const override { return options_.size; }
  Pair& pair(int peer) override;
  Pair& control(int peer) override { return bootstrap_->control(peer); }
  // Stop notices travel on the control channels (the bootstrap's) and as the text of the UCX
  // pairs' goodbyes.
  void stop(const std::string& reason) override;

 private:
  std::string prefix() const { return rank_prefix(rank()); }
  void log(const std::string& message) const;
  // Every rank's worker address, indexed by rank (rank 0 collects them and sends the table).
  std::vector<std::vector<std::byte>> exchange_addresses();
  std::vector<std::vector<std::byte>> collect_addresses();
  void close_pairs();
  // A peer's stop notice (progress thread), from its goodbye or a control channel: relayed in
  // the goodbyes to every UCX peer but `except` (the one whose goodbye carried it; -1: none).
  void on_stop_notice(int peer, const std::string& reason, int except);

  const Options options_;
  std::unique_ptr<Context> bootstrap_;  // destroyed last: the control channels
  const TcpContextLinks links_;
  std::vector<std::shared_ptr<UcxPair>> pairs_;
  std::unique_ptr<UcxWorker> worker_;  // destroyed first: pairs outlive their callbacks
  bool relaying_ = false;              // progress thread: a UCX peer's stop notice is being relayed
};

}  // namespace threelc::transport::detail
