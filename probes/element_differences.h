#pragma once
// The first elements where a BF16 tensor differs from its reference, each with where it lies
// (flat and multi-index in the full tensor), both values (bits and decimal) and their BF16 ULP
// distance: what a failed bitwise claim prints so that the reader sees where it fails.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engine/bf16.h"
#include "engine/tensor.h"

namespace psi::probes {

// How many differing elements a failed claim prints by default.
inline constexpr std::int64_t kShownDifferences = 5;

struct ElementDifference {
  std::int64_t flat_index = 0;  // row-major, in the full tensor
  Shape index;                  // the same as a multi-index of the full tensor
  Bf16 ours, ref;
};

// The first `limit` elements whose bits differ, `ours` against `ref` (equal sizes, psi::Error
// otherwise); the spans hold the full tensor's elements from `offset` on.
std::vector<ElementDifference> first_differences(std::span<const Bf16> ours, std::span<const Bf16> ref,
                                                 const Shape& full_shape, std::int64_t offset, std::int64_t limit);

// "[0, 17, 301] (flat 70061): psi 0x3c8a (0.016845703) recording 0x3c8b (0.016967773), 1 ulp"
// with the two sides named `ours_name` and `ref_name`; a sign flip or a NaN says so instead of
// an ULP count (the ULP distance across zero says nothing of the error).
std::string format_difference(const ElementDifference& d, const std::string& ours_name, const std::string& ref_name);

// Where `ours` differs from `ref` (same shapes), as a failed bitwise claim of a run prints it:
// "<what>: the first K of D differing elements, by index in the [..] tensor", then one
// format_difference line each. Empty when the tensors are bitwise equal.
std::vector<std::string> difference_lines(const std::string& what, const Bf16Tensor& ours, const Bf16Tensor& ref,
                                          const std::string& ours_name, const std::string& ref_name,
                                          std::int64_t limit = kShownDifferences);

}  // namespace psi::probes
