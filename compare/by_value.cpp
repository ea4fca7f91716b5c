#include "compare/by_value.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#include "engine/bf16.h"
#include "engine/distance.h"

namespace psi::compare {

namespace {

// Coarseness of an element type's steps: fewer significand bits first, integers last.
int coarseness(hdf5::ElemKind k) {
  switch (k) {
    case hdf5::ElemKind::bf16: return 0;
    case hdf5::ElemKind::f32: return 1;
    case hdf5::ElemKind::f64: return 2;
    default: return 3;
  }
}

// The float32 nearest `x` on the side `up` (toward +Inf) or not (toward -Inf): x itself when it
// is a float32 value.
float f32_toward(double x, bool up) {
  float f = float(x);
  if (up && double(f) < x) f = std::nextafter(f, std::numeric_limits<float>::infinity());
  if (!up && double(f) > x) f = std::nextafter(f, -std::numeric_limits<float>::infinity());
  return f;
}

// The same for BF16, whose values are float32 values: the float32 bound, then its top 16 bits
// (a cut toward zero), one step further from zero when that is the way asked for.
Bf16 bf16_toward(double x, bool up) {
  const float f = f32_toward(x, up);
  const Bf16 cut = Bf16::from_bits(std::uint16_t(std::bit_cast<std::uint32_t>(f) >> 16));
  if (cut.to_float() == f) return cut;
  const bool away_from_zero = up ? f > 0 : f < 0;
  return away_from_zero ? Bf16::from_bits(std::uint16_t(cut.bits + 1)) : cut;
}

}  // namespace

UlpUnit coarser_unit(hdf5::ElemKind a, hdf5::ElemKind b) {
  switch (std::min(coarseness(a), coarseness(b))) {
    case 0: return UlpUnit::bf16;
    case 1: return UlpUnit::f32;
    case 2: return UlpUnit::f64;
    default: return UlpUnit::one;
  }
}

std::string_view unit_name(UlpUnit u) {
  switch (u) {
    case UlpUnit::bf16: return "bfloat16";
    case UlpUnit::f32: return "float32";
    case UlpUnit::f64: return "float64";
    case UlpUnit::one: return "1";
  }
  return "1";
}

bool exact_in_double(std::int64_t v) {
  const double d = double(v);
  // 2^63 (INT64_MAX rounded up) is no int64: test it before converting back.
  return d < 0x1p63 && std::int64_t(d) == v;
}

bool equal_by_value(double a, double b) {
  return (std::isnan(a) && std::isnan(b)) || std::bit_cast<std::uint64_t>(a) == std::bit_cast<std::uint64_t>(b);
}

std::int64_t ulps_in(UlpUnit u, double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return kUlpNaN;
  const double lo = std::min(a, b), hi = std::max(a, b);
  switch (u) {
    case UlpUnit::bf16: return ulps_apart(bf16_toward(lo, false), bf16_toward(hi, true));
    case UlpUnit::f32: return ulps_apart(f32_toward(lo, false), f32_toward(hi, true));
    case UlpUnit::f64: return ulps_apart(lo, hi);
    case UlpUnit::one: {
      // Integers of exact doubles: their difference fits an unsigned 64-bit word.
      const std::uint64_t d = std::uint64_t(std::int64_t(hi)) - std::uint64_t(std::int64_t(lo));
      return std::int64_t(std::min<std::uint64_t>(d, std::uint64_t(kUlpNaN - 1)));
    }
  }
  return kUlpNaN;
}

}  // namespace psi::compare
