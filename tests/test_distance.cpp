// The one distance between two tensors (engine/distance.h) and its rule for non-finite values:
// equal values add nothing (an Inf on both sides), a NaN on either side makes the relative L2 NaN
// (even one NaN's bits on both sides: a NaN is no value), the reference's norm is over its finite
// values, a zero norm under a nonzero error is +Inf.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <vector>

#include "engine/distance.h"
#include "engine/error.h"

namespace {

using psi::Bf16;
constexpr double kInf = std::numeric_limits<double>::infinity();

Bf16 b(float f) { return psi::bf16_rne(f); }
std::vector<Bf16> bf(std::initializer_list<float> v) {
  std::vector<Bf16> out;
  for (float f : v) out.push_back(b(f));
  return out;
}

}  // namespace

// The same tensor holding Infs is at distance 0: (Inf − Inf)² would make it NaN.
TEST(Distance, IdenticalTensorsWithInfsAreAtZero) {
  const std::vector<Bf16> t = bf({1.0f, float(kInf), -float(kInf), 2.0f});
  const psi::Distance d = psi::distance(t, t);
  EXPECT_TRUE(d.bitwise_equal());
  EXPECT_EQ(d.total, 4);
  EXPECT_EQ(d.rel_l2, 0.0);
  EXPECT_EQ(d.max_ulp_same_sign, 0);
}

// The same tensor holding a NaN is bitwise equal to itself, but its relative L2 is NaN: a run
// whose states are NaN must not show a zero error beside itself (FoundBug.MaxRelL2OverStatesDoesNotHideNaN).
TEST(Distance, IdenticalTensorsWithANaNAreBitwiseEqualAtNaN) {
  std::vector<Bf16> t = bf({1.0f, 2.0f});
  t.push_back(Bf16{0x7fc1});
  const psi::Distance d = psi::distance(t, t);
  EXPECT_TRUE(d.bitwise_equal());
  EXPECT_EQ(d.max_ulp_same_sign, 0);
  EXPECT_TRUE(std::isnan(d.rel_l2));
  const std::vector<float> f{1.0f, std::nanf("")};
  EXPECT_TRUE(std::isnan(psi::distance(f, f).rel_l2));
}

// An Inf where both sides hold it adds nothing to the error, and nothing to the norm: the other
// elements' relative L2 is what it would be without it (an Inf norm would make it 0).
TEST(Distance, AnInfOnBothSidesLeavesTheRestMeasured) {
  const psi::Distance d = psi::distance(bf({float(kInf), 1.5f, 2.0f}), bf({float(kInf), 1.0f, 2.0f}));
  EXPECT_EQ(d.differing, 1);
  EXPECT_EQ(d.rel_l2, std::sqrt(0.25 / 5.0));
  // The same against a float64 reference.
  const psi::Distance f = psi::distance(bf({float(kInf), 1.5f, 2.0f}), std::vector<double>{kInf, 1.0, 2.0});
  EXPECT_EQ(f.differing, 1);
  EXPECT_EQ(f.rel_l2, std::sqrt(0.25 / 5.0));
}

// A reference Inf against a finite value is an infinite error (Inf / Inf would be NaN).
TEST(Distance, AFiniteValueAgainstAReferenceInfIsInfinite) {
  const psi::Distance d = psi::distance(bf({2.0f, 1.0f}), bf({float(kInf), 1.0f}));
  EXPECT_EQ(d.differing, 1);
  EXPECT_EQ(d.rel_l2, kInf);
  EXPECT_EQ(d.sign_flips, 0);
}

// A zero reference norm (zeros, or only non-finite values besides): +Inf under a nonzero error.
TEST(Distance, ZeroReferenceNormIsInfiniteUnderAnError) {
  EXPECT_EQ(psi::distance(bf({1.0f, 0.0f}), bf({0.0f, 0.0f})).rel_l2, kInf);
  EXPECT_EQ(psi::distance(bf({float(kInf), 1.0f}), bf({float(kInf), 0.0f})).rel_l2, kInf);
  EXPECT_EQ(psi::distance(std::vector<double>{0.0, 0.0}, std::vector<double>{0.0, 0.0}).rel_l2, 0.0);
}

// +0 against −0 differs in bits, is no sign flip and no error: 0, not NaN (0 / 0).
TEST(Distance, SignsOfZeroDifferInBitsOnly) {
  const psi::Distance d = psi::distance(bf({-0.0f, 0.0f}), bf({0.0f, 0.0f}));
  EXPECT_EQ(d.differing, 1);
  EXPECT_EQ(d.sign_flips, 0);
  EXPECT_EQ(d.max_ulp_same_sign, 0);
  EXPECT_EQ(d.rel_l2, 0.0);
}

// A NaN on either side: NaN relative L2, the largest ULP distance, no sign flip.
TEST(Distance, ANaNOnEitherSideIsNaN) {
  for (const bool in_ours : {true, false}) {
    const std::vector<Bf16> x = bf({1.0f, 2.0f});
    std::vector<Bf16> y = x;
    y[1] = Bf16{0x7fc0};
    const psi::Distance d = in_ours ? psi::distance(y, x) : psi::distance(x, y);
    EXPECT_EQ(d.differing, 1);
    EXPECT_TRUE(std::isnan(d.rel_l2));
    EXPECT_EQ(d.max_ulp_same_sign, psi::kUlpNaN);
    EXPECT_EQ(d.sign_flips, 0);
  }
  const psi::Distance f = psi::distance(std::vector<float>{1.0f, std::nanf("")}, std::vector<float>{1.0f, 1.0f});
  EXPECT_TRUE(std::isnan(f.rel_l2));
  EXPECT_EQ(f.max_ulp_same_sign, psi::kUlpNaN);
}

// ULPs of each element type, counted apart from the sign flips; float64's largest same-sign
// distance (0 to Inf) stays below kUlpNaN.
TEST(Distance, UlpsPerTypeAndSignFlipsApart) {
  const float one_up = std::nextafter(1.0f, 2.0f), tiny = std::numeric_limits<float>::denorm_min();
  const psi::Distance f = psi::distance(std::vector<float>{one_up, tiny}, std::vector<float>{1.0f, -tiny});
  EXPECT_EQ(f.sign_flips, 1);
  EXPECT_EQ(f.max_ulp_same_sign, 1);
  const psi::Distance d = psi::distance(std::vector<double>{kInf, 0.0}, std::vector<double>{0.0, -1.0});
  EXPECT_EQ(d.sign_flips, 2);  // zero against a nonzero value, either way
  const psi::Distance e =
      psi::distance(std::vector<double>{kInf}, std::vector<double>{std::numeric_limits<double>::denorm_min()});
  EXPECT_EQ(e.sign_flips, 0);
  EXPECT_EQ(e.max_ulp_same_sign, std::int64_t(0x7ff0000000000000) - 1);
  EXPECT_LT(e.max_ulp_same_sign, psi::kUlpNaN);
}

// Summed in pieces in order, the distance is the whole one, bit for bit.
TEST(Distance, PiecesInOrderAreTheWhole) {
  std::vector<float> a, r;
  for (int i = 0; i < 100; ++i) {
    r.push_back(std::sin(float(i)) * 3.0f);
    a.push_back(r.back() + (i % 7 == 0 ? 1e-3f * float(i) : 0.0f));
  }
  const psi::Distance whole = psi::distance(a, r);
  psi::DistanceSum<float, float> s;
  for (std::size_t at = 0; at < a.size(); at += 30) {
    const std::size_t n = std::min<std::size_t>(30, a.size() - at);
    s.add(std::span<const float>(a.data() + at, n), std::span<const float>(r.data() + at, n));
  }
  const psi::Distance pieces = s.result();
  EXPECT_EQ(pieces.total, whole.total);
  EXPECT_EQ(pieces.differing, whole.differing);
  EXPECT_EQ(std::bit_cast<std::uint64_t>(pieces.rel_l2), std::bit_cast<std::uint64_t>(whole.rel_l2));
  EXPECT_GT(whole.rel_l2, 0.0);
}

TEST(Distance, SizesMustMatch) {
  EXPECT_THROW(psi::distance(bf({1.0f}), bf({1.0f, 2.0f})), psi::Error);
}
