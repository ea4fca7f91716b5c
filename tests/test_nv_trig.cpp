// libdevice's cosf/sinf model (engine/official/nv_trig.h): the value the recorded full block's RoPE
// table implies, its error against the correctly rounded result, both reductions, special values.
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include <gtest/gtest.h>

#include "engine/official/nv_trig.h"

using namespace psi;

namespace {

std::uint32_t bits(float x) { return std::bit_cast<std::uint32_t>(x); }

// Signed distance in float32 ULPs along the ordered bit patterns (sign-magnitude to linear).
std::int64_t ulps(float a, float b) {
  auto linear = [](float x) {
    const std::int64_t b = std::int64_t(bits(x) & 0x7fffffff);
    return bits(x) >> 31 ? -b : b;
  };
  return linear(a) - linear(b);
}

// cos/sin rounded once to float32 from the 64-bit-significand long double result.
float cos_rounded(float x) { return float(std::cos(static_cast<long double>(x))); }
float sin_rounded(float x) { return float(std::sin(static_cast<long double>(x))); }

struct Sweep {
  std::int64_t points = 0, not_rounded = 0, max_ulp = 0;
};

// Every `stride`-th float32 bit pattern with a magnitude in [lo, hi), both signs.
template <class Model, class Reference>
Sweep sweep(const Model& model, const Reference& reference, float lo, float hi, std::uint32_t stride) {
  Sweep s;
  for (std::uint32_t b = bits(lo); b < bits(hi); b += stride)
    for (const float x : {std::bit_cast<float>(b), -std::bit_cast<float>(b)}) {
      const std::int64_t d = std::abs(ulps(model(x), reference(x)));
      ++s.points;
      s.not_rounded += d != 0;
      s.max_ulp = std::max(s.max_ulp, d);
    }
  return s;
}

}  // namespace

// The angle whose cos the recorded block_full video self-attention table rounds the other way:
// cos(−1128.7789) = −0.58398432592…, correctly rounded −0.5839843 (0xbf157fff); libdevice gives
// the float32 one ULP below, −0.583984375 (0xbf158000, the BF16 midpoint that ties to 0xbf16).
TEST(NvTrig, CosOfTheFullBlockAngleIsOneUlpBelowTheRoundedValue) {
  const float x = -1128.7789f;
  EXPECT_EQ(cos_rounded(x), -0.5839843f);
  EXPECT_EQ(bits(cos_rounded(x)), 0xbf157fffu);
  EXPECT_EQ(official::nv_cosf(x), -0.583984375f);
  EXPECT_EQ(bits(official::nv_cosf(x)), 0xbf158000u);
  EXPECT_EQ(std::cos(x), cos_rounded(x));  // the host's cosf is the rounded one
  EXPECT_EQ(official::cos_f32(x, official::F32Math::cuda), official::nv_cosf(x));
  EXPECT_EQ(official::cos_f32(x, official::F32Math::host), std::cos(x));
}

// CUDA documents 2 ULPs for cosf/sinf over the whole range. On a sweep through the fast
// reduction (|x| < 105615) and through the Payne–Hanek one up to FLT_MAX the model is never more
// than 1 ULP from the correctly rounded value, and takes the other neighbour at 13–20 % of the
// points: a faithful, not a correctly rounded, function (which is why psi's host cosf differs).
TEST(NvTrig, WithinOneUlpOfTheRoundedValueOnASweep) {
  const float huge = std::numeric_limits<float>::max();
  const Sweep fast_cos = sweep(official::nv_cosf, cos_rounded, 1e-3f, 105615.0f, 997);
  const Sweep fast_sin = sweep(official::nv_sinf, sin_rounded, 1e-3f, 105615.0f, 997);
  const Sweep slow_cos = sweep(official::nv_cosf, cos_rounded, 105615.0f, huge, 99991);
  const Sweep slow_sin = sweep(official::nv_sinf, sin_rounded, 105615.0f, huge, 99991);
  EXPECT_EQ(fast_cos.points, 447408);
  EXPECT_EQ(slow_cos.points, 18690);
  for (const Sweep* s : {&fast_cos, &fast_sin, &slow_cos, &slow_sin}) EXPECT_EQ(s->max_ulp, 1);
  EXPECT_EQ(fast_cos.not_rounded, 61570);
  EXPECT_EQ(fast_sin.not_rounded, 58484);
  EXPECT_EQ(slow_cos.not_rounded, 3566);
  EXPECT_EQ(slow_sin.not_rounded, 3670);
}

// Small arguments: sin x = x and cos x = 1 exactly where the polynomial's terms vanish.
TEST(NvTrig, SmallArgumentsAndSigns) {
  for (const float x : {1e-20f, 1e-6f, -3e-5f}) {
    EXPECT_EQ(official::nv_sinf(x), x);
    EXPECT_EQ(official::nv_cosf(x), 1.0f);
  }
  EXPECT_EQ(official::nv_cosf(0.0f), 1.0f);
  EXPECT_EQ(official::nv_sinf(0.0f), 0.0f);
  // Odd and even functions, through both reductions.
  for (const float x : {0.7f, 2.5f, 1128.7789f, 3.0e5f, 1.0e30f}) {
    EXPECT_EQ(official::nv_sinf(-x), -official::nv_sinf(x)) << x;
    EXPECT_EQ(official::nv_cosf(-x), official::nv_cosf(x)) << x;
  }
}

TEST(NvTrig, NonFiniteArgumentsGiveNaN) {
  for (const float x : {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                        std::numeric_limits<float>::quiet_NaN()}) {
    EXPECT_TRUE(std::isnan(official::nv_cosf(x))) << x;
    EXPECT_TRUE(std::isnan(official::nv_sinf(x))) << x;
  }
}

// The two reductions agree with the exact one: q modulo 4 and r = x − q·π/2 (long double π/2,
// exact enough below 2^24) within a float32 ULP of r, on both sides of the switch at 105615.
TEST(NvTrig, ReductionsAgreeWithTheExactOne) {
  const long double half_pi = 1.5707963267948966192313216916397514L;
  for (const float x : {105614.99f, 105615.0f, 105615.01f, 123456.7f, 1.0e6f, -2.5e6f, 16777215.0f}) {
    const official::TrigReduction red = official::nv_trig_reduce(x);
    const long double q = std::nearbyint(static_cast<long double>(x) / half_pi);
    const float r = float(static_cast<long double>(x) - q * half_pi);
    EXPECT_EQ((red.q - std::int64_t(q)) % 4, 0) << x;
    EXPECT_LE(std::abs(ulps(red.r, r)), 1) << x;
    EXPECT_LE(std::abs(red.r), 0.7854f) << x;
  }
  // At the top of the range, where only 2/π's low limbs decide the fraction.
  const float top = std::numeric_limits<float>::max();
  EXPECT_LE(std::abs(ulps(official::nv_sinf(top), sin_rounded(top))), 1);
  EXPECT_LE(std::abs(ulps(official::nv_cosf(top), cos_rounded(top))), 1);
}
