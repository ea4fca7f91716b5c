#include "engine/distance.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <string>
#include <type_traits>

#include "engine/bf16_f64.h"
#include "engine/error.h"

namespace psi {

bool is_sign_flip(double ours, double ref) {
  if (std::isnan(ours) || std::isnan(ref)) return false;
  const auto sign = [](double v) { return (v > 0) - (v < 0); };
  return sign(ours) != sign(ref);
}

namespace {

// ULP distance of two IEEE values of the same sign class from their bit patterns: the distance
// of their magnitudes' positions on the ordered line (+0 and −0 share 0).
template <class U>
std::int64_t ieee_ulp(U a, U b) {
  constexpr U mag = U(~U(0)) >> 1;
  const U ma = a & mag, mb = b & mag;
  return std::int64_t(ma > mb ? ma - mb : mb - ma);
}

std::int64_t elem_ulp(Bf16 a, Bf16 b) { return a.is_nan() || b.is_nan() ? kUlpNaN : bf16_ulp_distance(a, b); }
std::int64_t elem_ulp(float a, float b) {
  return std::isnan(a) || std::isnan(b) ? kUlpNaN : ieee_ulp(std::bit_cast<std::uint32_t>(a), std::bit_cast<std::uint32_t>(b));
}
std::int64_t elem_ulp(double a, double b) {
  return std::isnan(a) || std::isnan(b) ? kUlpNaN : ieee_ulp(std::bit_cast<std::uint64_t>(a), std::bit_cast<std::uint64_t>(b));
}

double elem_value(Bf16 v) { return double(v.to_float()); }
double elem_value(float v) { return double(v); }
double elem_value(double v) { return v; }

template <class T>
auto elem_bits(T v) {
  if constexpr (std::is_same_v<T, Bf16>) return v.bits;
  else if constexpr (std::is_same_v<T, float>) return std::bit_cast<std::uint32_t>(v);
  else return std::bit_cast<std::uint64_t>(v);
}

// What `ours` is counted against: the reference itself, or a float64 reference's BF16 rounding.
template <class Ours, class Ref>
Ours counted_against(Ref r) {
  if constexpr (std::is_same_v<Ours, Ref>) return r;
  else return bf16_of_f64(r);
}

}  // namespace

std::int64_t ulps_apart(Bf16 a, Bf16 b) { return elem_ulp(a, b); }
std::int64_t ulps_apart(float a, float b) { return elem_ulp(a, b); }
std::int64_t ulps_apart(double a, double b) { return elem_ulp(a, b); }

template <class Ours, class Ref>
void DistanceSum<Ours, Ref>::add(std::span<const Ours> ours, std::span<const Ref> ref) {
  if (ours.size() != ref.size())
    throw Error("distance: " + std::to_string(ours.size()) + " elements against a reference of " +
                std::to_string(ref.size()));
  d_.total += std::int64_t(ref.size());
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const double a = elem_value(ours[i]), b = elem_value(ref[i]);
    if (std::isfinite(b)) den_ += b * b;
    const Ours r = counted_against<Ours>(ref[i]);
    const bool same_bits = elem_bits(ours[i]) == elem_bits(r);
    if (a != b) num_ += (a - b) * (a - b);  // +0 == −0 and Inf == Inf add nothing; a NaN is never equal
    if (same_bits) continue;
    ++d_.differing;
    if (is_sign_flip(ours[i], r))
      ++d_.sign_flips;
    else
      d_.max_ulp_same_sign = std::max(d_.max_ulp_same_sign, elem_ulp(ours[i], r));
  }
}

template <class Ours, class Ref>
Distance DistanceSum<Ours, Ref>::result() const {
  Distance d = d_;
  d.rel_l2 = num_ == 0.0 ? 0.0 : std::sqrt(num_ / den_);  // num_ / 0 is +Inf (NaN for a NaN num_)
  return d;
}

template class DistanceSum<Bf16, Bf16>;
template class DistanceSum<float, float>;
template class DistanceSum<double, double>;
template class DistanceSum<Bf16, double>;

namespace {
template <class Ours, class Ref>
Distance whole_distance(std::span<const Ours> ours, std::span<const Ref> ref) {
  DistanceSum<Ours, Ref> s;
  s.add(ours, ref);
  return s.result();
}
}  // namespace

Distance distance(std::span<const Bf16> ours, std::span<const Bf16> ref) { return whole_distance(ours, ref); }
Distance distance(std::span<const float> ours, std::span<const float> ref) { return whole_distance(ours, ref); }
Distance distance(std::span<const double> ours, std::span<const double> ref) { return whole_distance(ours, ref); }
Distance distance(std::span<const Bf16> ours, std::span<const double> ref) { return whole_distance(ours, ref); }

}  // namespace psi
