#pragma once
// Row-major 2-D views over host buffers: what every CPU operator takes and writes. A view
// never owns memory; `ld` is the distance between row starts in elements, so a column slice
// of a larger matrix (a tile, a page-sized weight slice) is a view too.
#include <cstdint>
#include <type_traits>
#include <vector>

#include "engine/error.h"
#include "engine/tensor.h"

namespace psi {

template <class T>
struct Matrix {
  T* data = nullptr;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::int64_t ld = 0;

  T* row(std::int64_t r) const { return data + r * ld; }
  T& at(std::int64_t r, std::int64_t c) const { return data[r * ld + c]; }
  // Rows [r0, r0+nr) and columns [c0, c0+nc) of this view.
  Matrix block(std::int64_t r0, std::int64_t nr, std::int64_t c0, std::int64_t nc) const {
    return Matrix{data + r0 * ld + c0, nr, nc, ld};
  }
  operator Matrix<const T>() const { return Matrix<const T>{data, rows, cols, ld}; }
};

using CBf16Mat = Matrix<const Bf16>;
using Bf16Mat = Matrix<Bf16>;
using CF32Mat = Matrix<const float>;
using F32Mat = Matrix<float>;

// A tensor seen as a matrix: the last axis is the columns, all others flattened into rows.
template <class T>
Matrix<const T> as_matrix(const Tensor<T>& t) {
  if (t.shape.empty()) throw Error("as_matrix: tensor has no axes");
  std::int64_t cols = t.shape.back();
  std::int64_t rows = cols == 0 ? 0 : t.numel() / cols;
  return Matrix<const T>{t.ptr(), rows, cols, cols};
}
template <class T>
Matrix<T> as_matrix(Tensor<T>& t) {
  if (t.shape.empty()) throw Error("as_matrix: tensor has no axes");
  std::int64_t cols = t.shape.back();
  std::int64_t rows = cols == 0 ? 0 : t.numel() / cols;
  return Matrix<T>{t.ptr(), rows, cols, cols};
}

// m's elements transposed into a new [cols, rows] buffer (row stride rows): e.g. V as [H·d, Nk]
// for products that reduce over the keys.
template <class T>
std::vector<std::remove_const_t<T>> transposed(Matrix<T> m) {
  std::vector<std::remove_const_t<T>> out(static_cast<std::size_t>(m.rows * m.cols));
  for (std::int64_t r = 0; r < m.rows; ++r)
    for (std::int64_t c = 0; c < m.cols; ++c) out[static_cast<std::size_t>(c * m.rows + r)] = m.at(r, c);
  return out;
}

}  // namespace psi
