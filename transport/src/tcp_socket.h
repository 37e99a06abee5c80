// Socket-level helpers shared by the TCP transport: socket tuning, endpoint and duration text for
// messages, and the whole-frame read/write coroutines of the handshake and rendezvous.
#pragma once

#include <utility>  // before any Asio header (Boost 1.74 with C++20)

// Boost 1.74 looks only for clang's coroutines TS; clang-tidy (clang 14, libstdc++) has C++20's.
#if defined(__clang__) && defined(__cpp_impl_coroutine) && !defined(BOOST_ASIO_HAS_CO_AWAIT)
#define BOOST_ASIO_HAS_CO_AWAIT 1
#endif
#include <boost/asio.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace threelc::transport::detail {

namespace asio = boost::asio;
using asio::ip::tcp;
using Clock = std::chrono::steady_clock;
using boost::system::error_code;

// A handshake failure that concerns the remote end (logged, connection dropped).
struct HandshakeError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// "1.5 s".
std::string seconds_text(std::chrono::milliseconds ms);
// "10.0.0.1:4242" or "[::1]:4242".
std::string endpoint_text(const tcp::endpoint& endpoint);
// The peer's endpoint text, or "an unknown address".
std::string remote_text(const tcp::socket& socket);

// Completion condition for large payloads: 1 MiB per system call instead of Asio's 64 KiB.
size_t large_transfers(const error_code& ec, size_t);

// Socket options every connection gets (TCP_NODELAY).
void tune_socket(tcp::socket& socket);

// Writes one frame (header and payload).
asio::awaitable<void> write_frame(tcp::socket& socket, uint32_t tag,
                                  std::span<const std::byte> payload);

// Reads one frame with `tag` whose length is at most `max_length`; throws HandshakeError.
asio::awaitable<std::vector<std::byte>> read_frame(tcp::socket& socket, uint32_t tag,
                                                   uint64_t max_length);

}  // namespace threelc::transport::detail
