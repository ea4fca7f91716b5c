#include "engine/sha256.h"

#include <openssl/evp.h>

#include <cstdio>

#include "engine/error.h"

namespace psi {

std::string sha256_hex(const void* data, std::size_t bytes) {
  static_assert(std::endian::native == std::endian::little, "psi hashes little-endian bytes");
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(data, bytes, md, &len, EVP_sha256(), nullptr) != 1)
    throw Error("sha256: OpenSSL EVP_Digest failed", Exit::run_failed);
  std::string hex(2 * len, '0');
  for (unsigned i = 0; i < len; ++i) std::snprintf(&hex[2 * i], 3, "%02x", md[i]);
  return hex;
}

}  // namespace psi
