#pragma once
// Where weight tiles come from: "rows [r0,r1) x cols [c0,c1) of tensor NAME, as BF16, into this
// host buffer". A tensor is addressed through its 2-D view: rank >= 2 as
// [shape[0], product of the rest], rank 1 as [n, 1] (so a bias slices along with its weight's
// rows), rank 0 as [1, 1].
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "engine/bf16.h"
#include "engine/tensor.h"

namespace psi::ckpt {

struct Slice {
  std::int64_t r0 = 0, r1 = 0, c0 = 0, c1 = 0;

  std::int64_t rows() const { return r1 - r0; }
  std::int64_t cols() const { return c1 - c0; }
  std::int64_t numel() const { return rows() * cols(); }
};

struct Matrix2d {
  std::int64_t rows = 1, cols = 1;
};

Matrix2d matrix_view(const Shape& shape);

// "rows [0, 16) cols [0, 64)"
std::string slice_str(const Slice& s);

// Throws psi::Error naming the tensor when the slice is empty, out of the 2-D view's range, or
// `out_numel` does not match it.
void check_slice(std::string_view name, const Shape& shape, const Slice& s, std::size_t out_numel);

class WeightSource {
 public:
  virtual ~WeightSource() = default;
  virtual std::string describe() const = 0;
  virtual bool contains(std::string_view name) const = 0;
  // Throws psi::Error for an unknown name.
  virtual Shape shape(std::string_view name) const = 0;
  // Writes the slice row-major into out (exactly s.numel() values).
  virtual void read(std::string_view name, const Slice& s, std::span<Bf16> out) const = 0;
  // The slice's values, row-major and contiguous, where the source already holds them in host
  // memory a copy can read directly (page-locked on CUDA); nullptr where it does not, and then
  // the pages stage the slice through read().
  virtual const Bf16* resident(std::string_view name, const Slice& s) const {
    (void)name;
    (void)s;
    return nullptr;
  }
};

}  // namespace psi::ckpt
