#pragma once
// Fixture attributes for a tensor written with its sha256_full, as psi and the recordings write
// every tensor: the readers refuse a tensor they cannot check (hdf5/unverified.h).
#include "engine/sha256.h"
#include "engine/tensor.h"
#include "hdf5/h5.h"

namespace psi::test {

template <class T>
hdf5::Attrs hashed(const Tensor<T>& t, hdf5::Attrs a = {}) {
  a["sha256_full"] = sha256_hex(t.ptr(), t.bytes());
  return a;
}

}  // namespace psi::test
