#pragma once
// The distance of a tensor to a reference tensor, element by element: the one measurement behind
// psi probe's rows, the experiments' distances to a recording or to the float64 block, and psi
// compare's floating-point datasets. A new measurement is a field here, its computation in
// distance.cpp and its entry in engine/metric.h, which every table and psi compare enumerate
// (docs/contributing.md, "Add a metric").
//
// Counts. `differing`: elements whose bits differ (against a float64 reference: from the
// reference correctly rounded to BF16, engine/bf16_f64.h). Among them `sign_flips`: a sign class
// (−1, 0 for +0 and −0 alike, +1; a NaN has none) against another, i.e. a negative against a
// positive value or zero against a nonzero one; the ULP distance across zero counts every value
// near zero, so a flip is counted apart. `max_ulp_same_sign`: the largest ULP distance over the
// other differing elements, kUlpNaN when a NaN is involved.
//
// Relative L2, ||ours − ref|| / ||ref|| in float64, sums in element order. The one rule for
// non-finite values:
//  - an element adds (ours − ref)² to the numerator unless the two are equal numbers (+0 and −0,
//    an Inf on both sides); a NaN on either side, even the same NaN's bits on both (a NaN is no
//    number), makes the numerator and the result NaN, an Inf against another value +Inf; the
//    counts still compare bits, so a tensor holding a NaN is bitwise equal to itself at NaN;
//  - the reference's norm sums its finite values only: an Inf in the reference must not turn
//    every relative error into 0;
//  - the result is 0 when the numerator is 0 (identical tensors, or differing only in the sign
//    of zeros), +Inf when the numerator is not and the reference's norm is 0, else
//    sqrt(numerator / norm²).
#include <cstdint>
#include <limits>
#include <span>

#include "engine/bf16.h"

namespace psi {

// max_ulp_same_sign when a NaN is involved: above every ULP distance of two same-sign values,
// even float64's (at most 0x7ff0000000000000 steps from 0 to Inf).
inline constexpr std::int64_t kUlpNaN = std::numeric_limits<std::int64_t>::max();

struct Distance {
  std::int64_t total = 0;
  std::int64_t differing = 0;
  std::int64_t sign_flips = 0;
  std::int64_t max_ulp_same_sign = 0;
  double rel_l2 = 0.0;
  bool bitwise_equal() const { return differing == 0; }
};

// The ULP distance of two values of one sign class (is_sign_flip false), as max_ulp_same_sign
// counts it: the steps of their type between their magnitudes (+0 and −0 are 0 apart); kUlpNaN
// when either is a NaN.
std::int64_t ulps_apart(Bf16 a, Bf16 b);
std::int64_t ulps_apart(float a, float b);
std::int64_t ulps_apart(double a, double b);

// Whether two values' sign classes differ (a NaN's never does).
bool is_sign_flip(double ours, double ref);
inline bool is_sign_flip(Bf16 ours, Bf16 ref) { return is_sign_flip(double(ours.to_float()), double(ref.to_float())); }

// A distance summed over pieces of two tensors (psi compare walks a stored box row by row): each
// add() continues the sums in order, so pieces in row-major order give distance() of the whole.
// Defined for (Bf16, Bf16), (float, float), (double, double) and (Bf16, double), the last a
// float64 reference.
template <class Ours, class Ref>
class DistanceSum {
 public:
  // Sizes must match (psi::Error otherwise).
  void add(std::span<const Ours> ours, std::span<const Ref> ref);
  Distance result() const;

 private:
  Distance d_;
  double num_ = 0.0, den_ = 0.0;
};

Distance distance(std::span<const Bf16> ours, std::span<const Bf16> ref);
Distance distance(std::span<const float> ours, std::span<const float> ref);
Distance distance(std::span<const double> ours, std::span<const double> ref);
// To a float64 reference: relative L2 against its values, the counts against its BF16 rounding.
Distance distance(std::span<const Bf16> ours, std::span<const double> ref);

}  // namespace psi
