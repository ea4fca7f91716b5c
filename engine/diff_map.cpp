#include "engine/diff_map.h"

#include <algorithm>

#include "engine/error.h"
#include "engine/distance.h"

namespace psi {

namespace {

// The class of one differing element: as engine/distance.h counts them, a NaN is no sign flip and has the
// largest ULP distance.
int ulp_class(Bf16 ours, Bf16 ref) {
  if (is_sign_flip(ours, ref)) return kSignFlipClass;
  const std::int64_t u = bf16_ulp_distance(ours, ref);
  int cls = 1;
  for (std::int64_t top = 1; u > top && cls < kSignFlipClass - 1; top *= 2) ++cls;
  return cls;
}

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

}  // namespace

std::string ulp_class_label(int cls) {
  if (cls == kSignFlipClass) return "sign flip";
  if (cls == kSignFlipClass - 1) return ">" + std::to_string(std::int64_t(1) << (cls - 2));
  if (cls <= 2) return std::to_string(cls);
  return std::to_string((std::int64_t(1) << (cls - 2)) + 1) + "-" + std::to_string(std::int64_t(1) << (cls - 1));
}

std::int64_t DiffMap::differing() const {
  std::int64_t n = 0;
  for (std::int64_t c : histogram) n += c;
  return n;
}

DiffMap diff_map(std::span<const Bf16> ours, std::span<const Bf16> ref, std::int64_t first_row, std::int64_t rows,
                 std::int64_t cols) {
  if (ours.size() != ref.size() || std::int64_t(ref.size()) != rows * cols)
    throw Error("diff_map: " + std::to_string(ours.size()) + " elements against " + std::to_string(ref.size()) +
                ", for " + std::to_string(rows) + " x " + std::to_string(cols));
  DiffMap m;
  m.first_row = first_row;
  m.rows = rows;
  m.cols = cols;
  m.row_step = std::max<std::int64_t>(1, ceil_div(rows, kMaxMapRows));
  m.col_step = std::max<std::int64_t>(1, ceil_div(cols, kMaxMapCols));
  std::vector<std::string> cls(std::size_t(ceil_div(rows, m.row_step)),
                               std::string(std::size_t(ceil_div(cols, m.col_step)), 0));
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) {
      const std::size_t i = std::size_t(r * cols + c);
      if (ours[i].bits == ref[i].bits) continue;
      const int k = ulp_class(ours[i], ref[i]);
      ++m.histogram[std::size_t(k - 1)];
      char& cell = cls[std::size_t(r / m.row_step)][std::size_t(c / m.col_step)];
      cell = std::max(cell, char(k));
    }
  for (auto& row : cls)
    for (char& c : row) c = "0123456789abcdef"[int(c)];
  m.cells = std::move(cls);
  return m;
}

}  // namespace psi
