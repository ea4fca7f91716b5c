#pragma once
// Host tensors: a shape and a flat row-major buffer. Element type says what is held (Bf16,
// float, double); a byte count is never confused with an element count.
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <span>
#include <string>
#include <vector>

#include "engine/bf16.h"

namespace psi {

using Shape = std::vector<std::int64_t>;

inline std::int64_t numel(const Shape& s) {
  return std::accumulate(s.begin(), s.end(), std::int64_t{1}, std::multiplies<>());
}

std::string shape_str(const Shape& s);  // "[1, 616, 512]"

template <class T>
struct Tensor {
  Shape shape;
  std::vector<T> data;

  Tensor() = default;
  explicit Tensor(Shape s) : shape(std::move(s)), data(std::size_t(psi::numel(shape))) {}
  Tensor(Shape s, std::vector<T> d) : shape(std::move(s)), data(std::move(d)) {}

  std::int64_t numel() const { return std::int64_t(data.size()); }
  std::size_t bytes() const { return data.size() * sizeof(T); }
  std::int64_t dim(int i) const { return shape.at(i < 0 ? shape.size() + i : i); }
  T* ptr() { return data.data(); }
  const T* ptr() const { return data.data(); }
  std::span<T> span() { return data; }
  std::span<const T> span() const { return data; }
};

using Bf16Tensor = Tensor<Bf16>;
using F32Tensor = Tensor<float>;
using F64Tensor = Tensor<double>;

}  // namespace psi
