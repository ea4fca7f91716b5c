#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>

#include "engine/bf16.h"

using psi::Bf16;
using psi::bf16_rne;

namespace {
float f(std::uint32_t bits) { return std::bit_cast<float>(bits); }
}  // namespace

TEST(Bf16, DecodeIsTopSixteenBits) {
  EXPECT_EQ(Bf16::from_bits(0x3f80).to_float(), 1.0f);
  EXPECT_EQ(Bf16::from_bits(0xbf80).to_float(), -1.0f);
  EXPECT_EQ(Bf16::from_bits(0x4049).to_float(), 3.140625f);
  EXPECT_EQ(Bf16::from_bits(0x0001).to_float(), std::ldexp(1.0f, -133));  // smallest subnormal
}

TEST(Bf16, ExactValuesRoundTrip) {
  for (std::uint32_t b = 0; b < 0x10000; ++b) {
    Bf16 v = Bf16::from_bits(std::uint16_t(b));
    if (v.is_nan()) continue;
    EXPECT_EQ(bf16_rne(v.to_float()).bits, v.bits) << std::hex << b;
  }
}

TEST(Bf16, RoundsToNearest) {
  // 1 + 2^-8 + 2^-10 lies above the midpoint between 1 and 1 + 2^-7.
  EXPECT_EQ(bf16_rne(f(0x3f80a000)).bits, 0x3f81);
  // Below the midpoint: down.
  EXPECT_EQ(bf16_rne(f(0x3f807fff)).bits, 0x3f80);
  EXPECT_EQ(bf16_rne(f(0xbf807fff)).bits, 0xbf80);
  EXPECT_EQ(bf16_rne(f(0xbf808001)).bits, 0xbf81);
}

TEST(Bf16, TiesGoToEven) {
  EXPECT_EQ(bf16_rne(f(0x3f808000)).bits, 0x3f80);  // even below: stays
  EXPECT_EQ(bf16_rne(f(0x3f818000)).bits, 0x3f82);  // odd below: up to even
  EXPECT_EQ(bf16_rne(f(0xbf818000)).bits, 0xbf82);
  EXPECT_EQ(bf16_rne(f(0x00008000)).bits, 0x0000);  // subnormal tie, even
  EXPECT_EQ(bf16_rne(f(0x00018000)).bits, 0x0002);  // subnormal tie, odd
}

TEST(Bf16, SubnormalsAndZeros) {
  EXPECT_EQ(bf16_rne(0.0f).bits, 0x0000);
  EXPECT_EQ(bf16_rne(-0.0f).bits, 0x8000);
  EXPECT_EQ(bf16_rne(f(0x00000001)).bits, 0x0000);  // tiny float32 subnormal rounds to +0
  EXPECT_EQ(bf16_rne(f(0x80000001)).bits, 0x8000);  // and keeps its sign
  EXPECT_EQ(bf16_rne(f(0x00010000)).bits, 0x0001);
  EXPECT_EQ(bf16_rne(f(0x007fffff)).bits, 0x0080);  // largest subnormal rounds up into normals
}

TEST(Bf16, InfinityOverflowAndNaN) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(bf16_rne(inf).bits, 0x7f80);
  EXPECT_EQ(bf16_rne(-inf).bits, 0xff80);
  EXPECT_EQ(bf16_rne(std::numeric_limits<float>::max()).bits, 0x7f80);  // overflow to Inf
  EXPECT_EQ(bf16_rne(f(0x7f7f7fff)).bits, 0x7f7f);                       // largest finite stays
  Bf16 n = bf16_rne(std::numeric_limits<float>::quiet_NaN());
  EXPECT_TRUE(n.is_nan());
  Bf16 sn = bf16_rne(f(0xff800001));  // signalling NaN with only low payload bits
  EXPECT_TRUE(sn.is_nan());
  EXPECT_TRUE(sn.sign());
  EXPECT_TRUE(bf16_rne(inf).is_inf());
}

TEST(Bf16, UlpDistance) {
  Bf16 one = Bf16::from_bits(0x3f80);
  EXPECT_EQ(psi::bf16_ulp_distance(one, one), 0);
  EXPECT_EQ(psi::bf16_ulp_distance(one, Bf16::from_bits(0x3f81)), 1);
  EXPECT_EQ(psi::bf16_ulp_distance(Bf16::from_bits(0x0000), Bf16::from_bits(0x8000)), 0);
  EXPECT_EQ(psi::bf16_ulp_distance(Bf16::from_bits(0x0001), Bf16::from_bits(0x8001)), 2);
  EXPECT_EQ(psi::bf16_ulp_distance(Bf16::from_bits(0x3f7f), Bf16::from_bits(0x3f80)), 1);  // across a binade
  EXPECT_EQ(psi::bf16_ulp_distance(Bf16::from_bits(0x7fc0), one), std::numeric_limits<std::int64_t>::max());
  EXPECT_EQ(psi::bf16_ulp(one), std::ldexp(1.0f, -7));
}

// The paper's eq. (5): rounding before the bias add loses the bias, rounding once keeps it.
TEST(Bf16, PaperEquationFiveDoubleRounding) {
  const float z = 257.0f / 256.0f, b = 1.0f / 256.0f;
  EXPECT_EQ(psi::bf(psi::bf(z) + b), 1.0f);
  EXPECT_EQ(psi::bf(z + b), 129.0f / 128.0f);
}
