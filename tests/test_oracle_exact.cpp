// The three exact paths (GMP rational, Boost cpp_rational, fixed-point bins) agree on random
// and adversarial dot products, and the tensor path equals GMP element by element.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "engine/error.h"
#include "oracle/exact_boost.h"
#include "oracle/exact_gmp.h"
#include "oracle/fixed_dot.h"
#include "oracle/rounding.h"

namespace po = psi::oracle;
using psi::Bf16;

namespace {

constexpr Bf16 kMaxFinite = Bf16::from_bits(0x7f7f);   // 255 * 2^120
constexpr Bf16 kMinSubnormal = Bf16::from_bits(0x0001);  // 2^-133

Bf16 bf(double v) {  // a value the test knows to be exactly representable
  Bf16 b = psi::bf16_rne(float(v));
  EXPECT_EQ(double(b.to_float()), v) << "test value not exact in BF16";
  return b;
}

struct Case {
  std::vector<Bf16> x, w;
  std::optional<Bf16> b;
};

class Gen {
 public:
  explicit Gen(std::uint64_t seed) : rng_(seed) {}
  Bf16 any_finite() {  // every finite bit pattern equally likely: all exponents, subnormals
    for (;;) {
      Bf16 v = Bf16::from_bits(std::uint16_t(rng_()));
      if (v.is_finite()) return v;
    }
  }
  Bf16 typical(int e) {  // SynthInit-like: |v| < 2^-e
    return psi::bf16_rne(float(std::uniform_real_distribution<double>(-1, 1)(rng_) * std::ldexp(1.0, -e)));
  }
  Bf16 subnormal() { return Bf16::from_bits(std::uint16_t((rng_() & 0x807f) | 1)); }
  int k(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  bool coin() { return rng_() & 1; }
  std::mt19937_64& rng() { return rng_; }

 private:
  std::mt19937_64 rng_;
};

std::vector<Case> cases() {
  std::vector<Case> out;
  Gen g(20261129);
  // Random bit patterns: exponent spread over the whole range, subnormals and huge values.
  for (int i = 0; i < 1500; ++i) {
    Case c;
    int k = g.k(1, 40);
    for (int j = 0; j < k; ++j) c.x.push_back(g.any_finite()), c.w.push_back(g.any_finite());
    if (g.coin()) c.b = g.any_finite();
    out.push_back(c);
  }
  // Realistic magnitudes, long K.
  for (int i = 0; i < 300; ++i) {
    Case c;
    int k = g.k(100, 600);
    for (int j = 0; j < k; ++j) c.x.push_back(g.typical(0)), c.w.push_back(g.typical(6));
    c.b = g.typical(3);
    out.push_back(c);
  }
  // Cancellation: pairs that cancel exactly, a huge pair cancelling around a tiny residual.
  for (int i = 0; i < 600; ++i) {
    Case c;
    int k = g.k(1, 30);
    for (int j = 0; j < k; ++j) {
      Bf16 a = g.any_finite(), v = g.any_finite();
      c.x.push_back(a), c.w.push_back(v);
      c.x.push_back(a), c.w.push_back(Bf16::from_bits(std::uint16_t(v.bits ^ 0x8000)));
      if (g.coin()) c.x.push_back(g.subnormal()), c.w.push_back(g.typical(g.k(0, 100)));
    }
    c.x.push_back(kMaxFinite), c.w.push_back(kMaxFinite);
    c.x.push_back(kMaxFinite), c.w.push_back(Bf16::from_bits(0xff7f));
    if (g.coin()) c.b = g.subnormal();
    out.push_back(c);
  }
  // Exact ties: v + half its ULP, possibly hidden under a cancelling huge pair.
  for (int i = 0; i < 600; ++i) {
    Case c;
    Bf16 v = g.any_finite();
    float half = psi::bf16_ulp(v) / 2;
    if (half == 0.0f || !std::isfinite(v.to_float())) continue;
    Bf16 h = psi::bf16_rne(v.sign() ? -half : half);
    c.x = {v, h};
    c.w = {bf(1), bf(1)};
    if (g.coin()) {
      c.x.push_back(kMaxFinite), c.w.push_back(bf(1));
      c.x.push_back(kMaxFinite), c.w.push_back(bf(-1));
    }
    out.push_back(c);
  }
  // Extremes: the smallest subnormal squared, the largest finite squared, 65,536 terms.
  out.push_back({{kMinSubnormal}, {kMinSubnormal}, kMinSubnormal});
  out.push_back({{kMaxFinite}, {kMaxFinite}, kMaxFinite});
  Case longk;
  for (int j = 0; j < 65536; ++j) longk.x.push_back(kMaxFinite), longk.w.push_back(kMaxFinite);
  out.push_back(longk);
  Case longmix;
  for (int j = 0; j < 65536; ++j) longmix.x.push_back(g.any_finite()), longmix.w.push_back(g.any_finite());
  longmix.b = g.any_finite();
  out.push_back(longmix);
  return out;
}

}  // namespace

TEST(OracleExact, GmpBoostAndFixedAgree) {
  const auto all = cases();
  ASSERT_GT(all.size(), 3000u);
  int ties = 0;
  for (std::size_t i = 0; i < all.size(); ++i) {
    const auto& c = all[i];
    const mpq_class g = po::exact_dot_gmp(c.x, c.w, c.b);
    ASSERT_EQ(po::to_mpq(po::exact_dot_boost(c.x, c.w, c.b)), g) << "case " << i << " K=" << c.x.size();
    const po::ExactSum f = po::exact_dot_fixed(c.x, c.w, c.b);
    ASSERT_EQ(f.to_mpq(), g) << "case " << i;
    ASSERT_EQ(f.sign(), sgn(g)) << "case " << i;
    ASSERT_EQ(f.round_bf16().bits, po::round_to_bf16(g).bits) << "case " << i << " exact " << g.get_str();
    const Bf16 r = po::round_to_bf16(g);
    ties += r.is_finite() && std::fabs(po::signed_ulp_error(r, g)) == 0.5;
  }
  EXPECT_GE(ties, 400);  // the tie cases really are exact midpoints
}

TEST(OracleExact, KnownValues) {
  // The largest finite BF16 squared, 65,536 times: 2^16 * (255 * 2^120)^2, far beyond float.
  std::vector<Bf16> big(65536, kMaxFinite);
  mpq_class want = mpq_class(255 * 255) * mpq_class(mpz_class(1) << 256);
  EXPECT_EQ(po::exact_dot_gmp(big, big, std::nullopt), want);
  EXPECT_EQ(po::exact_dot_fixed(big, big, std::nullopt).to_mpq(), want);
  EXPECT_TRUE(po::exact_dot_fixed(big, big, std::nullopt).round_bf16().is_inf());
  // The smallest subnormal squared: 2^-266.
  std::vector<Bf16> tiny{kMinSubnormal};
  mpq_class t(1);
  mpq_div_2exp(t.get_mpq_t(), t.get_mpq_t(), 266);
  EXPECT_EQ(po::exact_dot_fixed(tiny, tiny, std::nullopt).to_mpq(), t);
  EXPECT_EQ(po::exact_dot_fixed(tiny, tiny, std::nullopt).round_bf16().bits, 0x0000);
  // Exact cancellation to zero gives +0.
  std::vector<Bf16> x{bf(3), bf(3)}, w{bf(0.5), bf(-0.5)};
  EXPECT_EQ(po::exact_dot_fixed(x, w, std::nullopt).sign(), 0);
  EXPECT_EQ(po::exact_dot_fixed(x, w, std::nullopt).round_bf16().bits, 0x0000);
}

TEST(OracleExact, TensorPathEqualsGmpElementwise) {
  Gen g(7);
  const std::int64_t M = 9, N = 11, K = 67;
  std::vector<Bf16> x(M * K), w(N * K), b(N);
  for (auto& v : x) v = g.coin() ? g.typical(0) : g.any_finite();
  for (auto& v : w) v = g.coin() ? g.typical(6) : g.subnormal();
  for (auto& v : b) v = g.typical(3);
  const auto y1 = po::correctly_rounded_linear(x, w, b, K, 0, M, 1);
  const auto y3 = po::correctly_rounded_linear(x, w, b, K, 0, M, 3);
  const auto part = po::correctly_rounded_linear(x, w, b, K, 2, 7, 2);
  ASSERT_EQ(y1.shape, (psi::Shape{M, N}));
  ASSERT_EQ(part.shape, (psi::Shape{5, N}));
  for (std::int64_t r = 0; r < M; ++r)
    for (std::int64_t c = 0; c < N; ++c) {
      std::span<const Bf16> xr(x.data() + r * K, K), wc(w.data() + c * K, K);
      const Bf16 want = po::round_to_bf16(po::exact_dot_gmp(xr, wc, b[c]));
      EXPECT_EQ(y1.data[r * N + c].bits, want.bits) << r << "," << c;
      EXPECT_EQ(y3.data[r * N + c].bits, want.bits) << r << "," << c;
      if (r >= 2 && r < 7) {
        EXPECT_EQ(part.data[(r - 2) * N + c].bits, want.bits) << r << "," << c;
      }
    }
  // Without a bias.
  const auto nb = po::correctly_rounded_linear(x, w, {}, K, 0, 1, 1);
  for (std::int64_t c = 0; c < N; ++c)
    EXPECT_EQ(nb.data[c].bits,
              po::round_to_bf16(po::exact_dot_gmp({x.data(), std::size_t(K)}, {w.data() + c * K, std::size_t(K)},
                                                  std::nullopt)).bits);
}

TEST(OracleExact, RejectsNonFiniteAndBadShapes) {
  std::vector<Bf16> x{bf(1), Bf16::from_bits(0x7f80)}, w{bf(1), bf(1)};
  EXPECT_THROW(po::exact_dot_gmp(x, w, std::nullopt), psi::Error);
  EXPECT_THROW(po::exact_dot_boost(x, w, std::nullopt), psi::Error);
  EXPECT_THROW(po::exact_dot_fixed(x, w, std::nullopt), psi::Error);
  EXPECT_THROW(po::correctly_rounded_linear(x, w, {}, 2, 0, 1, 1), psi::Error);
  std::vector<Bf16> nan_b{Bf16::from_bits(0x7fc1)};
  EXPECT_THROW(po::exact_dot_fixed({x.data(), 1}, {w.data(), 1}, nan_b[0]), psi::Error);
  EXPECT_THROW(po::exact_dot_gmp(x, {w.data(), 1}, std::nullopt), psi::Error);
  EXPECT_THROW(po::correctly_rounded_linear(w, w, {}, 3, 0, 1, 1), psi::Error);   // not whole rows
  EXPECT_THROW(po::correctly_rounded_linear(w, w, {}, 2, 0, 2, 1), psi::Error);   // rows beyond x
  EXPECT_THROW(po::correctly_rounded_linear(w, w, w, 2, 0, 1, 1), psi::Error);    // bias length != N
}
