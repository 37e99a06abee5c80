// The transport: rendezvous through the coordinator (rank 0), an authenticated control channel
// between every rank and the coordinator, and data channels between every pair of ranks
// (authenticated TCP connections, or UCX endpoints with THREELC_TRANSPORT=ucx, which UCX does
// not authenticate). It knows nothing of tensors or codecs: it moves tagged byte messages.
//
// Error model: failures throw threelc::transport::Error, whose message names the peer rank and
// what happened (refused, closed, timed out, malformed frame, wrong secret); no wait is
// unbounded.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>

#include "threelc/settings/setting.h"

namespace threelc::transport {

class Error : public std::runtime_error {
 public:
  Error(int peer, const std::string& message, bool timed_out = false)
      : std::runtime_error(message), peer_(peer), timed_out_(timed_out) {}
  // The rank the failure concerns, or -1 when it concerns no single peer.
  int peer() const { return peer_; }
  // A wait ran past its timeout: the peer may itself be waiting for another rank.
  bool timed_out() const { return timed_out_; }

 private:
  int peer_;
  bool timed_out_;
};

// Who this rank is and how to reach the job. options_from_environment() fills it.
struct Options {
  // The defaults of the transport's rows (transport/src/settings_rows.h) with nothing set: a
  // single rank, no coordinator. No default is written here.
  Options();

  int rank = 0;                                // THREELC_RANK (or the launcher's)
  int size = 0;                                // THREELC_SIZE
  int local_rank = 0;                          // THREELC_LOCAL_RANK
  int local_size = 0;                          // THREELC_LOCAL_SIZE
  std::string coordinator_host = "127.0.0.1";  // THREELC_COORDINATOR=host:port
  uint16_t coordinator_port = 0;
  std::string secret;       // THREELC_SECRET: authenticates every connection
  std::string listen_host;  // THREELC_IFACE: interface name or address for data channels
  std::string transport;    // THREELC_TRANSPORT
  std::chrono::milliseconds start_timeout{};  // THREELC_START_TIMEOUT (seconds)
  std::chrono::milliseconds timeout{};        // THREELC_TIMEOUT (seconds): any other wait
  size_t max_message_bytes = 0;               // THREELC_MAX_MESSAGE_BYTES: frame limit
  bool debug = false;  // THREELC_TRANSPORT_DEBUG=1: log listeners and connections to stderr
  // "pmix" or "pmi2": the coordinator and the secret come through the launcher's wire-up
  // service (THREELC_COORDINATOR unset under mpirun or srun); connect() fills them in.
  std::string wireup;
};

// Reads the identity from THREELC_RANK/SIZE/LOCAL_RANK/LOCAL_SIZE (threelcrun), else from
// mpirun (OMPI_COMM_WORLD_*), srun (SLURM_PROCID, SLURM_STEP_NUM_TASKS, SLURM_LOCALID, and
// the local size from SLURM_STEP_TASKS_PER_NODE's entry at SLURM_NODEID) or torchrun (RANK,
// WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE), and the rest from THREELC_*. Under torchrun without
// THREELC_COORDINATOR the coordinator is MASTER_ADDR:(MASTER_PORT + 1), since MASTER_PORT is
// torch's own store; under mpirun or srun it comes, with the secret, through the launcher's PMIx or
// PMI-2 (`wireup`). Every variable is declared once, with its default, in
// transport/src/settings_rows.h. Throws Error naming the variable that is missing or malformed.
Options options_from_environment();

// options_from_environment() through `lookup` (an empty value counts as unset).
Options options_from(const settings::EnvironmentLookup& lookup);

// The transport's rows of environment variables (transport/src/settings_rows.h), for the docs and
// the C ABI's threelc_setting_at().
settings::SettingTable transport_settings();

namespace detail {
struct RequestState;
}

// Completion of one send or receive.
class Request {
 public:
  Request() = default;
  explicit Request(std::shared_ptr<detail::RequestState> state) : state_(std::move(state)) {}
  bool done() const;
  // Blocks until the transfer completes; returns its size in bytes. Throws Error naming the
  // peer when it failed or timed out. A wait that runs long asks the peer what it waits for
  // (a quarter of options.timeout, at most 3 s, before the timeout): a peer that does not
  // answer is named at options.timeout; a peer that itself waits for another rank is waited
  // for, since that rank's wait names the rank that failed and its stop notice ends this one
  // (at most three timeouts in all). A timeout also closes that pair (its other requests
  // fail): the stream is then out of step.
  size_t wait();

 private:
  std::shared_ptr<detail::RequestState> state_;
};

// A connection to one peer (the shape of gloo's transport::Pair): reliable, ordered messages,
// each with a tag. Several sends and receives may be in flight at once.
class Pair {
 public:
  virtual ~Pair() = default;
  virtual int peer() const = 0;
  // Sends one message. `bytes` must stay valid and unchanged until the request completes.
  virtual Request send(uint32_t tag, std::span<const std::byte> bytes) = 0;
  // Receives the next message with `tag` into `into` (its capacity); a longer message fails
  // the request (and is discarded). A receive posted before its message arrives gets the bytes
  // without a copy; one posted after gets them from a staging copy. Messages of one tag are
  // matched in the order they were sent; tags are independent.
  virtual Request recv(uint32_t tag, std::span<std::byte> into) = 0;
};

class Context {
 public:
  virtual ~Context() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Data channel to `peer` (any rank but this one).
  virtual Pair& pair(int peer) = 0;
  // Control channel: on rank 0 to `peer` (1..size-1); elsewhere to the coordinator (peer 0).
  virtual Pair& control(int peer) = 0;
  // This rank stops because of `reason` (the first cause of a failure): it tells every peer,
  // with a stop notice on each channel after the message being written there (within about a
  // second; a peer that does not read is skipped), then closes every channel, failing what is
  // pending. A rank that gets a stop notice from rank P fails every channel at once with
  // "rank P stopped: <reason>": so every rank reports the first cause, not the closed
  // connections that follow it.
  virtual void stop(const std::string& reason) = 0;
};

// Joins the job: authenticates to the coordinator, exchanges addresses, connects every pair.
// Throws Error naming the rank that never arrived within start_timeout, or failed to
// authenticate. Selects the implementation by options.transport: "tcp", or "ucx" (data channels
// over UCX, rendezvous and control over TCP; an Error when the build has no UCX).
std::unique_ptr<Context> connect(const Options& options);

}  // namespace threelc::transport
