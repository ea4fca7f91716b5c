#pragma once
// Where a BF16 tensor differs from its reference and by how many ULPs: the data of psi's
// difference figures (report/diff_figures.h). Each differing element falls in one ULP class
// (1, 2, 3-4, 5-8, ... 513-1024, over 1024; a sign flip as engine/distance.h counts it is a class
// of its own, since the ULP distance across zero says nothing of the error). The histogram counts
// the elements per class, so it sums to the differing count; the map bins tokens x channels down
// to at most kMaxMapRows x kMaxMapCols cells and gives each cell the largest class among its
// elements (0: every element equal, a sign flip above every ULP class).
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engine/bf16.h"

namespace psi {

inline constexpr int kUlpClasses = 13;  // classes 1..12: ULP ranges; 13: sign flip
inline constexpr int kSignFlipClass = kUlpClasses;
inline constexpr std::int64_t kMaxMapRows = 128, kMaxMapCols = 160;

// "1", "2", "3-4", ..., "513-1024", ">1024", "sign flip" for classes 1..kUlpClasses.
std::string ulp_class_label(int cls);

struct DiffMap {
  std::int64_t first_row = 0;           // the token rows compared: [first_row, first_row + rows)
  std::int64_t rows = 0, cols = 0;      // tokens x channels (every axis after the token axis)
  std::int64_t row_step = 1, col_step = 1;  // tokens and channels per cell
  // One string per cell row, one hex digit (the class, 0..kUlpClasses) per cell.
  std::vector<std::string> cells;
  std::vector<std::int64_t> histogram = std::vector<std::int64_t>(kUlpClasses, 0);  // [class - 1]
  std::int64_t differing() const;
  std::int64_t cell_rows() const { return std::int64_t(cells.size()); }
  std::int64_t cell_cols() const { return cells.empty() ? 0 : std::int64_t(cells.front().size()); }
};

// `ours` against `ref`, both `rows` x `cols` row-major; psi::Error when the sizes do not match.
DiffMap diff_map(std::span<const Bf16> ours, std::span<const Bf16> ref, std::int64_t first_row, std::int64_t rows,
                 std::int64_t cols);

}  // namespace psi
