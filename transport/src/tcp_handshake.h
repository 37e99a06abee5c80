// The authenticated handshake every TCP connection starts with: the Hello a connector sends, the
// HMAC proofs over the job secret, and the client and server steps (docs/WIRE_FORMAT.md).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "auth.h"
#include "tcp_socket.h"

namespace threelc::transport::detail {

inline constexpr uint32_t kProtocolVersion = 1;
// Handshake frame tags (only before a connection becomes a Pair).
inline constexpr uint32_t kTagHello = 1, kTagChallenge = 2, kTagProof = 3, kTagVerdict = 4,
                          kTagTable = 5;
inline constexpr uint64_t kMaxHandshakeFrame = 1024;
// Which listener a connection is for.
inline constexpr uint32_t kKindControl = 1, kKindData = 2;

// What a connector says about itself (the hello frame).
struct Hello {
  uint32_t version = kProtocolVersion;
  uint32_t kind = 0;
  int rank = 0;
  int size = 0;
  std::string host;  // the connector's data listener (control hello only)
  uint16_t port = 0;
  Nonce nonce{};

  std::vector<std::byte> encode() const;
  static bool decode(std::span<const std::byte> bytes, Hello& out);
};

// The local end of a handshake.
struct HandshakeSelf {
  int rank = 0;
  int size = 0;
  const std::string& secret;
};

// Server side of a handshake on a `kind` listener: returns the authenticated hello, or throws
// HandshakeError. `already_connected(rank)` says whether that rank holds this channel already;
// a refusal sent to the client is also left in `verdict_error`.
asio::awaitable<Hello> serve_handshake(tcp::socket& socket, const HandshakeSelf& self,
                                       uint32_t kind,
                                       const std::function<bool(int)>& already_connected,
                                       std::string& verdict_error);

// Client side: authenticates to `who` and checks the server is `expected_rank`; `data_host` and
// `data_port` name this rank's data listener. Throws HandshakeError or Error.
asio::awaitable<void> client_handshake(tcp::socket& socket, const HandshakeSelf& self,
                                       uint32_t kind, const std::string& data_host,
                                       uint16_t data_port, int expected_rank,
                                       const std::string& who);

}  // namespace threelc::transport::detail
