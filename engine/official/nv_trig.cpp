#include "engine/official/nv_trig.h"

#include <bit>
#include <cmath>
#include <cstdint>

namespace psi::official {

namespace {

float from_bits(std::uint32_t b) { return std::bit_cast<float>(b); }

// 2/π in 32-bit limbs, least significant first (0xa2f9836e… are its leading fraction bits): the
// values of libdevice's __cudart_i2opi_f.
constexpr std::uint32_t kTwoOverPi[6] = {0x3c439041, 0xdb629599, 0xf534ddc0, 0xfc2757d1, 0x4e441529, 0xa2f9836e};

// libdevice takes the slow reduction from here up (|x| ≥ 105615): below it the three-part
// Cody–Waite reduction is accurate enough for its error bound.
constexpr float kSlowPathFrom = 105615.0f;

// __internal_trig_reduction_slowpath: x's 24-bit significand (left-aligned in 32 bits) times the
// 192 bits of 2/π; the 64 bits after the quadrant bits, chosen by x's exponent, are the fraction.
TrigReduction payne_hanek(float x) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(x);
  std::uint32_t sign = bits & 0x80000000u;
  const std::uint32_t e = ((bits >> 23) & 0xff) - 128;  // at least 16 here
  const std::uint32_t m = (bits << 8) | 0x80000000u;
  std::uint32_t product[7];
  std::uint32_t carry = 0;
  for (int i = 0; i < 6; ++i) {
    const std::uint64_t p = std::uint64_t(kTwoOverPi[i]) * m + carry;
    product[i] = std::uint32_t(p);
    carry = std::uint32_t(p >> 32);
  }
  product[6] = carry;
  const std::uint32_t first = 4 - (e >> 5), shift = e & 31;
  std::uint32_t hi = product[first + 2], lo = product[first + 1];
  if (shift != 0) {
    hi = (hi << shift) + (lo >> (32 - shift));
    lo = (lo << shift) + (product[first] >> (32 - shift));
  }
  std::uint32_t q = hi >> 30;
  hi = (hi << 2) + (lo >> 30);
  lo <<= 2;
  // A fraction of one half or more rounds the quadrant up and leaves r = fraction − 1 < 0: its
  // magnitude is the ones' complement.
  const std::uint32_t up = hi >> 31;
  q += up;
  if (sign) q = 0u - q;
  if (up) {
    hi = ~hi;
    lo = ~lo;
    sign ^= 0x80000000u;
  }
  const std::int64_t fraction = std::int64_t((std::uint64_t(hi) << 32) | lo);
  // π/2 · 2^−64 as libdevice's double constant 0x3bf921fb54442d19.
  const double pi_over_2_scaled = std::bit_cast<double>(std::uint64_t(0x3bf921fb54442d19));
  const float r = float(double(fraction) * pi_over_2_scaled);
  return {sign ? -r : r, std::int32_t(q)};
}

// The polynomial on [−π/4, π/4] after the reduction: quadrant q odd evaluates cos(r), even
// sin(r); q & 2 negates.
float evaluate(TrigReduction red) {
  const float r = red.r, s = r * r;
  const bool cos_like = red.q & 1;
  const float base = cos_like ? 1.0f : r;
  const float z = std::fma(s, base, 0.0f);
  float p = cos_like ? std::fma(from_bits(0x37cbac00), s, from_bits(0xbab607ed)) : from_bits(0xb94d4153);
  p = std::fma(p, s, cos_like ? from_bits(0x3d2aaabb) : from_bits(0x3c0885e4));
  p = std::fma(p, s, cos_like ? from_bits(0xbeffffff) : from_bits(0xbe2aaaa8));
  const float y = std::fma(p, z, base);
  return (red.q & 2) ? std::fma(y, -1.0f, 0.0f) : y;
}

}  // namespace

TrigReduction nv_trig_reduce(float x) {
  if (std::fabs(x) >= kSlowPathFrom) {
    if (std::isinf(x)) return {x * 0.0f, 0};
    return payne_hanek(x);
  }
  // cvt.rni.s32.f32 of x·2/π (one float32 product, not fused); NaN converts to 0.
  const float scaled = x * from_bits(0x3f22f983);
  const std::int32_t j = std::isnan(scaled) ? 0 : std::int32_t(std::nearbyint(scaled));
  const float jf = float(j);
  float r = std::fma(jf, from_bits(0xbfc90fda), x);
  r = std::fma(jf, from_bits(0xb3a22168), r);
  r = std::fma(jf, from_bits(0xa7c234c5), r);
  return {r, j};
}

float nv_sinf(float x) { return evaluate(nv_trig_reduce(x)); }

float nv_cosf(float x) {
  TrigReduction red = nv_trig_reduce(x);
  red.q = std::int32_t(std::uint32_t(red.q) + 1);  // cos x = sin(x + π/2)
  return evaluate(red);
}

float cos_f32(float x, F32Math math) { return math == F32Math::cuda ? nv_cosf(x) : std::cos(x); }
float sin_f32(float x, F32Math math) { return math == F32Math::cuda ? nv_sinf(x) : std::sin(x); }

}  // namespace psi::official
