#pragma once
// Distance of a BF16 tensor to a reference BF16 tensor: bitwise equality, differing elements,
// relative L2 in float64 (||ours − ref|| / ||ref||), the elements whose sign changed and the
// largest BF16 ULP distance among the others. Sign changes are counted apart because the ULP
// distance across zero counts every BF16 value near zero: a near-zero element that changed sign
// reads tens of thousands of ULPs while its error is tiny.
#include <cstdint>
#include <span>
#include <string>

#include "engine/bf16.h"

namespace psi::probes {

struct Distance {
  std::int64_t total = 0;
  std::int64_t differing = 0;  // elements whose bits differ
  double rel_l2 = 0.0;         // float64; 0 for identical tensors
  // Differing elements whose sign (−, 0 or +; ±0 both 0) differs: a negative against a positive
  // value, or zero against a nonzero one. +0 against −0 is no sign flip; a NaN has no sign.
  std::int64_t sign_flips = 0;
  // The largest bf16_ulp_distance over the differing elements that are not sign flips; NaN on
  // either side gives the largest value.
  std::int64_t max_ulp_same_sign = 0;
  bool bitwise_equal() const { return differing == 0; }
};

// Whether a differing element counts as a sign flip (Distance::sign_flips).
bool is_sign_flip(Bf16 ours, Bf16 ref);

// Sizes must match (psi::Error otherwise).
Distance distance(std::span<const Bf16> ours, std::span<const Bf16> ref);

// Distance to a float64 reference: relative L2 in double against the float64 values
// (||ours − ref|| / ||ref||); differing elements, sign flips and ULPs against the reference
// correctly rounded to BF16 (model::bf16_of_f64).
Distance distance(std::span<const Bf16> ours, std::span<const double> ref);

// "bitwise-equal (5678 elements)" or
// "differs 1234/5678 rel_l2 1.23e-03 sign_flips 9 max_ulp_same_sign 5", the relative L2 named
// `rel_l2_name` (a distance to a float64 reference is another computation, named apart).
std::string format_distance(const Distance& d, const std::string& rel_l2_name = "rel_l2");

}  // namespace psi::probes
