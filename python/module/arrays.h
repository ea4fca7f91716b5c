#pragma once
// The module's side of an array: what the Python package (python/psi/_arrays.py) hands over is
// already C-contiguous, on the CPU, of the element type named here, so the C++ side only checks
// the rank and copies into psi's tensors (the copy is what lets the GIL go during the call).
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstdint>
#include <string>
#include <vector>

#include "engine/error.h"
#include "engine/tensor.h"

namespace psi::python {

namespace nb = nanobind;

// BF16 as its bit patterns.
using Bits = nb::ndarray<const std::uint16_t, nb::c_contig, nb::device::cpu>;
using BitsOut = nb::ndarray<nb::numpy, std::uint16_t>;

inline Shape shape_of(const Bits& a) {
  Shape s(a.ndim());
  for (std::size_t i = 0; i < a.ndim(); ++i) s[i] = std::int64_t(a.shape(i));
  return s;
}

inline Bf16Tensor bf16_tensor(const Bits& a) {
  Bf16Tensor t(shape_of(a));
  const std::uint16_t* bits = a.data();
  for (std::size_t i = 0; i < t.data.size(); ++i) t.data[i] = Bf16::from_bits(bits[i]);
  return t;
}

// A new NumPy array of uint16 that owns the tensor's elements.
inline BitsOut bits_array(Bf16Tensor&& t) {
  auto* owned = new std::vector<Bf16>(std::move(t.data));
  nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<std::vector<Bf16>*>(p); });
  std::vector<std::size_t> shape(t.shape.begin(), t.shape.end());
  return BitsOut(owned->data(), shape.size(), shape.data(), owner);
}

// The operand's rank, or a psi::Error naming the call and the operand.
inline void require_rank(const char* call, const char* what, const Shape& s, std::size_t lo, std::size_t hi) {
  if (s.size() < lo || s.size() > hi)
    throw Error(std::string(call) + ": " + what + " " + shape_str(s) + " has " + std::to_string(s.size()) +
                " dimensions; it takes " + (lo == hi ? std::to_string(lo) : std::to_string(lo) + " to " + std::to_string(hi)));
}

void bind_official(nb::module_& m);
void bind_oracle(nb::module_& m);
void bind_compare(nb::module_& m);

}  // namespace psi::python
