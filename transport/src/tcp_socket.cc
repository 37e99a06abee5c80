// Socket-level helpers shared by the TCP transport (see tcp_socket.h).
#include "tcp_socket.h"

#include <array>
#include <cstdio>

#include "frame.h"

namespace threelc::transport::detail {

std::string seconds_text(std::chrono::milliseconds ms) {
  char text[32];
  std::snprintf(text, sizeof text, "%g s", static_cast<double>(ms.count()) / 1000.0);
  return text;
}

std::string endpoint_text(const tcp::endpoint& endpoint) {
  const auto address = endpoint.address();
  // Appended piece by piece: GCC 12 -O3 reports a false -Wrestrict for "[" + std::string&&.
  std::string text;
  if (address.is_v6()) text += '[';
  text += address.to_string();
  if (address.is_v6()) text += ']';
  text += ':';
  text += std::to_string(endpoint.port());
  return text;
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

asio::awaitable<void> write_frame(tcp::socket& socket, uint32_t tag,
                                  std::span<const std::byte> payload) {
  const auto header = encode_frame_header(tag, payload.size());
  std::array<asio::const_buffer, 2> buffers{asio::buffer(header),
                                            asio::buffer(payload.data(), payload.size())};
  co_await asio::async_write(socket, buffers, asio::use_awaitable);
}

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

}  // namespace threelc::transport::detail
