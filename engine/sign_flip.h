#pragma once
// The one rule for a sign flip between two differing values (psi probe's distances, psi
// compare): each value's sign class is −1, 0 (+0 and −0 alike) or +1, and a NaN has none; a
// flip is a negative against a positive value, or zero against a nonzero one. A ULP distance
// across a flip measures the way through zero rather than the error, so distances report flips
// as a count of their own and the largest ULP distance over the other differing elements.
#include <cmath>

namespace psi {

inline bool is_sign_flip(double ours, double ref) {
  if (std::isnan(ours) || std::isnan(ref)) return false;
  const auto sign = [](double v) { return (v > 0) - (v < 0); };
  return sign(ours) != sign(ref);
}

}  // namespace psi
