// Correct rounding of exact rationals to BF16 (ties, subnormals, overflow, non-dyadic values)
// and the ULP measures of a candidate.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "oracle/exact_gmp.h"
#include "oracle/rounding.h"

namespace po = psi::oracle;
using psi::Bf16;

namespace {

mpq_class pow2(long e) {
  mpq_class q(1);
  if (e >= 0) mpq_mul_2exp(q.get_mpq_t(), q.get_mpq_t(), e);
  else mpq_div_2exp(q.get_mpq_t(), q.get_mpq_t(), -e);
  return q;
}

Bf16 next_up(Bf16 v) { return Bf16::from_bits(std::uint16_t(v.bits + 1)); }  // v >= 0 finite

}  // namespace

TEST(OracleRounding, EveryFiniteValueRoundsToItself) {
  for (std::uint32_t bits = 0; bits < 65536; ++bits) {
    Bf16 v = Bf16::from_bits(std::uint16_t(bits));
    if (!v.is_finite()) continue;
    Bf16 r = po::round_to_bf16(po::to_mpq(v));
    if (v.is_zero()) EXPECT_EQ(r.bits, 0x0000);  // an exact zero is +0
    else ASSERT_EQ(r.bits, v.bits) << std::hex << bits;
  }
}

TEST(OracleRounding, MidpointsTieToEvenAndNeighboursRoundToNearest) {
  // Every pair of adjacent positive finite values, both signs: the exact midpoint goes to the
  // even significand; a hair above or below goes to the nearer one.
  for (std::uint16_t bits = 0; bits < 0x7f7f; ++bits) {
    const Bf16 lo = Bf16::from_bits(bits), hi = next_up(lo);
    const mpq_class a = po::to_mpq(lo), b = po::to_mpq(hi);
    const mpq_class mid = (a + b) / 2, eps = (b - a) / 1024;
    const Bf16 even = (lo.bits & 1) ? hi : lo;
    ASSERT_EQ(po::round_to_bf16(mid).bits, even.bits) << std::hex << bits;
    ASSERT_EQ(po::round_to_bf16(mid + eps).bits, hi.bits) << std::hex << bits;
    ASSERT_EQ(po::round_to_bf16(mid - eps).bits, lo.is_zero() ? 0 : lo.bits) << std::hex << bits;
    ASSERT_EQ(po::round_to_bf16(-mid).bits, std::uint16_t(even.bits | 0x8000)) << std::hex << bits;
    ASSERT_EQ(po::round_to_bf16(-(mid + eps)).bits, std::uint16_t(hi.bits | 0x8000)) << std::hex << bits;
  }
}

TEST(OracleRounding, OverflowAndSubnormals) {
  const mpq_class max_finite = 255 * pow2(120);
  EXPECT_EQ(po::round_to_bf16(max_finite).bits, 0x7f7f);
  // The midpoint between the largest finite value and 2^128 rounds to even (2^128): Inf.
  EXPECT_EQ(po::round_to_bf16(mpq_class(511, 2) * pow2(120)).bits, 0x7f80);
  EXPECT_EQ(po::round_to_bf16(mpq_class(511, 2) * pow2(120) - pow2(100)).bits, 0x7f7f);
  EXPECT_EQ(po::round_to_bf16(-pow2(128)).bits, 0xff80);
  EXPECT_EQ(po::round_to_bf16(pow2(5000)).bits, 0x7f80);
  // Subnormal grid 2^-133: half the smallest subnormal ties to 0, 3/2 of it ties to 2.
  EXPECT_EQ(po::round_to_bf16(pow2(-134)).bits, 0x0000);
  EXPECT_EQ(po::round_to_bf16(-pow2(-134)).bits, 0x8000);
  EXPECT_EQ(po::round_to_bf16(pow2(-134) + pow2(-300)).bits, 0x0001);
  EXPECT_EQ(po::round_to_bf16(3 * pow2(-134)).bits, 0x0002);
  EXPECT_EQ(po::round_to_bf16(pow2(-126) - pow2(-134)).bits, 0x0080);  // ties up into the normals
  EXPECT_EQ(po::round_to_bf16(pow2(-5000)).bits, 0x0000);
  EXPECT_EQ(po::round_to_bf16(mpq_class(0)).bits, 0x0000);
}

TEST(OracleRounding, NonDyadicRationals) {
  // 1/3 = 1.0101010|1010... * 2^-2 rounds up to 1.0101011 * 2^-2.
  EXPECT_EQ(po::round_to_bf16(mpq_class(1, 3)).bits, 0x3eab);
  EXPECT_EQ(po::round_to_bf16(mpq_class(-1, 3)).bits, 0xbeab);
  // Random rationals: the result is a nearest BF16 value, ties to even.
  std::mt19937_64 rng(5);
  for (int i = 0; i < 20000; ++i) {
    mpz_class num = mpz_class(std::int64_t(rng() >> (rng() % 63))) * (rng() & 1 ? 1 : -1);
    mpz_class den = mpz_class(std::uint64_t(rng() >> (rng() % 63)) | 1);
    mpq_class v(num, den);
    v.canonicalize();
    v *= pow2(long(rng() % 220) - 160);  // |v| < 2^122: from far below the subnormals to large
    const Bf16 r = po::round_to_bf16(v);
    ASSERT_TRUE(r.is_finite());
    const mpq_class err = abs(po::to_mpq(r) - v);
    for (Bf16 n : {Bf16::from_bits(std::uint16_t(r.bits + 1)), Bf16::from_bits(std::uint16_t(r.bits - 1))}) {
      if (!n.is_finite()) continue;
      const mpq_class other = abs(po::to_mpq(n) - v);
      ASSERT_LE(err, other) << v.get_str();
      if (err == other) {
        ASSERT_EQ(r.bits & 1, 0) << v.get_str();
      }
    }
  }
}

TEST(OracleRounding, PaperEquation5DoubleRounding) {
  // z = 257/256 and b = 1/256: writing z as BF16 first gives bf(bf(z) + b) = 1, while the
  // correctly rounded z + b is 129/128.
  const mpq_class z(257, 256), b(1, 256);
  const Bf16 bz = po::round_to_bf16(z);
  EXPECT_EQ(bz.bits, 0x3f80);  // 1 + 2^-8 is a tie between 1 and 1 + 2^-7: even is 1
  EXPECT_EQ(po::round_to_bf16(po::to_mpq(bz) + b).bits, 0x3f80);
  const Bf16 cr = po::round_to_bf16(z + b);
  EXPECT_EQ(cr.bits, 0x3f81);
  EXPECT_EQ(po::to_mpq(cr), mpq_class(129, 128));
  const auto j = po::judge(Bf16::from_bits(0x3f80), z + b);
  EXPECT_EQ(j.correct.bits, 0x3f81);
  EXPECT_EQ(j.ulp_distance, 1);
  EXPECT_EQ(j.signed_ulps, -1.0);  // ULP in [1, 2) is 2^-7
}

TEST(OracleRounding, SignedUlpErrorAndFloorLog2) {
  EXPECT_EQ(po::floor_log2(mpq_class(1)), 0);
  EXPECT_EQ(po::floor_log2(mpq_class(255, 256)), -1);
  EXPECT_EQ(po::floor_log2(mpq_class(-3)), 1);
  EXPECT_EQ(po::floor_log2(pow2(-300)), -300);
  EXPECT_EQ(po::floor_log2(pow2(-300) * mpq_class(3, 2)), -300);
  EXPECT_EQ(po::floor_log2(mpq_class(1, 3)), -2);
  EXPECT_EQ(po::signed_ulp_error(Bf16::from_bits(0x3f80), mpq_class(257, 256)), -0.5);
  EXPECT_EQ(po::signed_ulp_error(Bf16::from_bits(0x3f81), mpq_class(257, 256)), 0.5);
  EXPECT_EQ(po::signed_ulp_error(Bf16::from_bits(0x4000), mpq_class(257, 256)), 127.5);
  EXPECT_EQ(po::signed_ulp_error(Bf16::from_bits(0xbf80), mpq_class(-1)), 0.0);
  // Subnormal range: the unit is 2^-133 (the ULP of the binade of 2^-126 and below).
  EXPECT_EQ(po::signed_ulp_error(Bf16::from_bits(0x0003), pow2(-133)), 2.0);
  EXPECT_EQ(po::signed_ulp_error(Bf16::from_bits(0x0001), mpq_class(0)), 1.0);
  EXPECT_EQ(po::signed_ulp_error(Bf16::from_bits(0x7f80), mpq_class(1)), INFINITY);
  EXPECT_EQ(po::signed_ulp_error(Bf16::from_bits(0xff80), mpq_class(1)), -INFINITY);
  EXPECT_TRUE(std::isnan(po::signed_ulp_error(Bf16::from_bits(0x7fc0), mpq_class(1))));
  const auto j = po::judge(Bf16::from_bits(0x7f80), 255 * pow2(120));
  EXPECT_EQ(j.ulp_distance, 1);  // Inf is one step above the largest finite value
}
