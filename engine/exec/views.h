#pragma once
// Arena tensors as the operators name them. An ArenaMat is a row-major [rows, cols] BF16 (or
// float32) tensor in a region of the arena; `ref` gives the OpKernels operand for it, which
// the backend's kernels resolve against their own arena (host memory on the CPU backend,
// device memory on CUDA).
#include <cstdint>

#include "engine/backend/op_kernels.h"
#include "engine/backend/region.h"
#include "engine/tensor.h"

namespace psi::exec {

struct ArenaMat {
  rt::DeviceRegion region;
  std::int64_t rows = 0, cols = 0;

  std::uint64_t bytes_bf16() const { return std::uint64_t(rows * cols) * 2; }
  Shape shape() const { return {rows, cols}; }
};

inline rt::MatRef ref(const ArenaMat& m) { return rt::MatRef::dense(m.region, m.rows, m.cols); }
inline rt::MatRef ref(const rt::DeviceRegion& r, std::int64_t rows, std::int64_t cols) {
  return rt::MatRef::dense(r, rows, cols);
}

}  // namespace psi::exec
