// HMAC-SHA256 challenge-response over the job secret (OpenSSL libcrypto).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace threelc::transport::detail {

using Nonce = std::array<std::byte, 32>;
using Mac = std::array<std::byte, 32>;

// 32 bytes from RAND_bytes; throws Error when the generator fails.
Nonce random_nonce();
// HMAC-SHA256(key, label || parts...).
Mac hmac_sha256(std::string_view key, std::string_view label,
                std::span<const std::span<const std::byte>> parts);
// Constant-time comparison (CRYPTO_memcmp).
bool macs_equal(const Mac& a, const Mac& b);

}  // namespace threelc::transport::detail
