#pragma once
// Arena tensors as the CPU kernels see them. An ArenaMat is a row-major [rows, cols] BF16 (or
// float32) tensor in a region of the arena; inside a kernel, `view` gives the ops' matrix view
// of it (the arena is host memory on the CPU backend). Ops that exist only on whole tensors
// (ada_value, one_plus, gated_residual, residual, RopeTables) get a kernel-local copy through
// load/store: host memory of the kernel, like a GPU kernel's registers, not arena state.
#include <cstdint>
#include <string>

#include "engine/ops/matrix.h"
#include "engine/runtime/backend.h"
#include "engine/runtime/region.h"
#include "engine/tensor.h"

namespace psi::exec {

struct ArenaMat {
  rt::DeviceRegion region;
  std::int64_t rows = 0, cols = 0;

  std::uint64_t bytes_bf16() const { return std::uint64_t(rows * cols) * 2; }
  Shape shape() const { return {rows, cols}; }
};

// The view of rows x cols elements with row stride ld (>= cols) starting at the region's start;
// throws psi::Error when it does not fit the region.
template <class T>
ops::Matrix<T> view(const rt::KernelContext& k, const rt::DeviceRegion& r, std::int64_t rows, std::int64_t cols,
                    std::int64_t ld);
template <class T>
ops::Matrix<T> view(const rt::KernelContext& k, const ArenaMat& m) {
  return view<T>(k, m.region, m.rows, m.cols, m.cols);
}

// A kernel-local copy of the first numel(shape) BF16 values of r, and its way back.
Bf16Tensor load(const rt::KernelContext& k, const rt::DeviceRegion& r, const Shape& shape);
void store(const rt::KernelContext& k, const Bf16Tensor& t, const rt::DeviceRegion& r);

}  // namespace psi::exec
