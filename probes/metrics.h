#pragma once
// Distance of a BF16 tensor to a reference BF16 tensor: bitwise equality, differing elements,
// relative L2 in float64 (||ours − ref|| / ||ref||) and the largest BF16 ULP distance.
#include <cstdint>
#include <span>
#include <string>

#include "engine/bf16.h"

namespace psi::probes {

struct Distance {
  std::int64_t total = 0;
  std::int64_t differing = 0;  // elements whose bits differ
  double rel_l2 = 0.0;         // float64; 0 for identical tensors
  std::int64_t max_ulp = 0;    // bf16_ulp_distance; NaN on either side gives the largest value
  bool bitwise_equal() const { return differing == 0; }
};

// Sizes must match (psi::Error otherwise).
Distance distance(std::span<const Bf16> ours, std::span<const Bf16> ref);

// Distance to a float64 reference: relative L2 in double against the float64 values; differing
// elements and ULPs against the reference correctly rounded to BF16 (model::bf16_of_f64).
Distance distance(std::span<const Bf16> ours, std::span<const double> ref);

// "bitwise-equal" or "differs 1234/5678 rel_l2 1.23e-03 max_ulp 5".
std::string format_distance(const Distance& d);

}  // namespace psi::probes
