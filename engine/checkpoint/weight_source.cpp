#include "engine/checkpoint/weight_source.h"

#include "engine/error.h"

namespace psi::ckpt {

Matrix2d matrix_view(const Shape& shape) {
  if (shape.empty()) return {1, 1};
  if (shape.size() == 1) return {shape[0], 1};
  std::int64_t cols = 1;
  for (std::size_t i = 1; i < shape.size(); ++i) cols *= shape[i];
  return {shape[0], cols};
}

std::string slice_str(const Slice& s) {
  return "rows [" + std::to_string(s.r0) + ", " + std::to_string(s.r1) + ") cols [" + std::to_string(s.c0) + ", " +
         std::to_string(s.c1) + ")";
}

void check_slice(std::string_view name, const Shape& shape, const Slice& s, std::size_t out_numel) {
  const Matrix2d m = matrix_view(shape);
  if (s.r0 < 0 || s.r0 >= s.r1 || s.r1 > m.rows || s.c0 < 0 || s.c0 >= s.c1 || s.c1 > m.cols)
    throw Error(std::string(name) + ": " + slice_str(s) + " is empty or outside its 2-D view [" + std::to_string(m.rows) +
                ", " + std::to_string(m.cols) + "] of " + shape_str(shape));
  if (std::int64_t(out_numel) != s.numel())
    throw Error(std::string(name) + ": " + slice_str(s) + " has " + std::to_string(s.numel()) +
                " values but the buffer holds " + std::to_string(out_numel));
}

}  // namespace psi::ckpt
