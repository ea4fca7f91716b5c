#pragma once
// SHA-256 (OpenSSL) of raw little-endian tensor bytes, as hex: the identity psi and the
// recordings give every tensor.
#include <cstddef>
#include <span>
#include <string>

#include "engine/tensor.h"

namespace psi {

std::string sha256_hex(const void* data, std::size_t bytes);

template <class T>
std::string sha256_hex(const Tensor<T>& t) {
  return sha256_hex(t.ptr(), t.bytes());
}

}  // namespace psi
