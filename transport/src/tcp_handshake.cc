// The authenticated handshake: Hello encoding, HMAC proofs, client and server steps.
#include "tcp_handshake.h"

#include <cstring>
#include <string_view>

#include "payload_bytes.h"
#include "rank_prefix.h"
#include "threelc/transport/transport.h"

namespace threelc::transport::detail {
namespace {

constexpr std::string_view kClientLabel = "threelc v1 client proof";
constexpr std::string_view kServerLabel = "threelc v1 server proof";

Mac proof(const std::string& secret, std::string_view label, std::span<const std::byte> hello,
          std::span<const std::byte> challenge) {
  const std::span<const std::byte> parts[] = {hello, challenge};
  return hmac_sha256(secret, label, parts);
}

std::string prefix(const HandshakeSelf& self) { return rank_prefix(self.rank); }

}  // namespace

std::vector<std::byte> Hello::encode() const {
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

bool Hello::decode(std::span<const std::byte> bytes, Hello& out) {
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

asio::awaitable<Hello> serve_handshake(tcp::socket& socket, const HandshakeSelf& self,
                                       uint32_t kind,
                                       const std::function<bool(int)>& already_connected,
                                       std::string& verdict_error) {
  const auto hello_bytes = co_await read_frame(socket, kTagHello, kMaxHandshakeFrame);
  Hello hello;
  if (!Hello::decode(hello_bytes, hello)) throw HandshakeError("malformed hello");
  if (hello.version != kProtocolVersion) {
    throw HandshakeError("protocol version " + std::to_string(hello.version) + " (expected " +
                         std::to_string(kProtocolVersion) + ")");
  }
  Writer challenge;
  challenge.u32(static_cast<uint32_t>(self.rank));
  challenge.raw(random_nonce());
  co_await write_frame(socket, kTagChallenge, challenge.bytes);
  const auto proof_bytes = co_await read_frame(socket, kTagProof, sizeof(Mac));
  Mac received{};
  if (proof_bytes.size() != received.size()) throw HandshakeError("malformed proof");
  std::memcpy(received.data(), proof_bytes.data(), received.size());
  if (!macs_equal(received, proof(self.secret, kClientLabel, hello_bytes, challenge.bytes))) {
    throw HandshakeError("authentication failed (claimed rank " + std::to_string(hello.rank) + ")");
  }
  // Authenticated: now the claims may be judged and answered.
  if (hello.kind != kind) {
    verdict_error = "connected to the wrong listener";
  } else if (hello.size != self.size) {
    verdict_error = "rank " + std::to_string(hello.rank) + " says the job has " +
                    std::to_string(hello.size) + " ranks, rank " + std::to_string(self.rank) +
                    " says " + std::to_string(self.size);
  } else if (hello.rank <= (kind == kKindControl ? 0 : -1) || hello.rank >= self.size ||
             (kind == kKindData && hello.rank >= self.rank)) {
    verdict_error = "rank " + std::to_string(hello.rank) + " is not expected here";
  } else if (already_connected(hello.rank)) {
    verdict_error = "rank " + std::to_string(hello.rank) + " is already connected";
  }
  Writer verdict;
  verdict.raw(proof(self.secret, kServerLabel, hello_bytes, challenge.bytes));
  verdict.text(verdict_error);
  co_await write_frame(socket, kTagVerdict, verdict.bytes);
  if (!verdict_error.empty()) throw HandshakeError(verdict_error);
  co_return hello;
}

asio::awaitable<void> client_handshake(tcp::socket& socket, const HandshakeSelf& self,
                                       uint32_t kind, const std::string& data_host,
                                       uint16_t data_port, int expected_rank,
                                       const std::string& who) {
  Hello hello;
  hello.kind = kind;
  hello.rank = self.rank;
  hello.size = self.size;
  hello.host = data_host;
  hello.port = data_port;
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
  const Mac mine = proof(self.secret, kClientLabel, hello_bytes, challenge);
  co_await write_frame(socket, kTagProof, mine);
  std::vector<std::byte> verdict;
  try {
    verdict = co_await read_frame(socket, kTagVerdict, kMaxHandshakeFrame);
  } catch (const HandshakeError& e) {
    // A server that refuses the proof reads it and closes (end of file); one that died with
    // the proof unread resets the connection.
    const std::string why = e.what();
    if (why.find("reset") != std::string::npos) {
      throw Error(expected_rank, prefix(self) + who +
                                     " closed the connection during the "
                                     "handshake (" +
                                     why + "): it has died or stopped");
    }
    throw Error(expected_rank, prefix(self) + who +
                                   " refused our authentication: is THREELC_SECRET the same "
                                   "on every rank? (or it died during the handshake)");
  }
  Reader v{verdict};
  const auto server_mac = v.fixed<32>();
  const std::string error = v.text(kMaxHandshakeFrame);
  if (!v.ok || v.at != verdict.size()) throw HandshakeError("malformed verdict");
  if (!macs_equal(server_mac, proof(self.secret, kServerLabel, hello_bytes, challenge))) {
    throw Error(expected_rank,
                prefix(self) + who + " failed to prove it knows THREELC_SECRET (wrong secret?)");
  }
  if (!error.empty())
    throw Error(expected_rank,
                prefix(self) + who + " refused rank " + std::to_string(self.rank) + ": " + error);
}

}  // namespace threelc::transport::detail
