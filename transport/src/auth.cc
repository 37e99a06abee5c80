#include "auth.h"

#include <openssl/crypto.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <vector>

#include "threelc/transport/transport.h"

namespace threelc::transport::detail {

Nonce random_nonce() {
  Nonce nonce{};
  if (RAND_bytes(reinterpret_cast<unsigned char*>(nonce.data()), static_cast<int>(nonce.size())) !=
      1) {
    throw Error(-1, "threelc: RAND_bytes failed to produce a nonce");
  }
  return nonce;
}

Mac hmac_sha256(std::string_view key, std::string_view label,
                std::span<const std::span<const std::byte>> parts) {
  // The messages are a few hundred bytes: concatenate and use the one-shot HMAC().
  std::vector<unsigned char> message(label.begin(), label.end());
  for (auto part : parts) {
    const auto* bytes = reinterpret_cast<const unsigned char*>(part.data());
    message.insert(message.end(), bytes, bytes + part.size());
  }
  Mac mac{};
  unsigned int length = 0;
  if (HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), message.data(), message.size(),
           reinterpret_cast<unsigned char*>(mac.data()), &length) == nullptr ||
      length != mac.size()) {
    throw Error(-1, "threelc: HMAC-SHA256 failed");
  }
  return mac;
}

bool macs_equal(const Mac& a, const Mac& b) {
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace threelc::transport::detail
