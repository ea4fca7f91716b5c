// The float32 evaluation orders: stable names, crafted sums where the orders differ, and the
// BF16-before-bias variant reproducing the paper's eq. (5) double rounding. The
// h200-tensor-core order has its own tests (test_oracle_tensor_core).
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "oracle/exact_gmp.h"
#include "oracle/f32_orders.h"
#include "oracle/rounding.h"

namespace po = psi::oracle;
using psi::Bf16;

namespace {

Bf16 bf(double v) {
  Bf16 b = psi::bf16_rne(float(v));
  EXPECT_EQ(double(b.to_float()), v) << "test value not exact in BF16";
  return b;
}

const po::F32Order& order(const std::string& name) {
  for (const auto& o : po::f32_orders())
    if (o.name == name) return o;
  throw std::runtime_error("no order " + name);
}

Bf16 eval(const std::string& name, const std::vector<Bf16>& x, const std::vector<Bf16>& w,
          std::optional<Bf16> b) {
  return po::f32_eval(order(name), x, w, b);
}

}  // namespace

TEST(OracleOrders, StableNames) {
  std::vector<std::string> names;
  for (const auto& o : po::f32_orders()) names.push_back(o.name);
  const std::vector<std::string> want{
      "seq", "pairwise", "block16", "block32", "block64", "block128", "block256",
      "seq+bf16-before-bias", "pairwise+bf16-before-bias", "block16+bf16-before-bias",
      "block32+bf16-before-bias", "block64+bf16-before-bias", "block128+bf16-before-bias",
      "block256+bf16-before-bias", "h200-tensor-core"};
  EXPECT_EQ(names, want);
}

TEST(OracleOrders, SeqAndPairwiseDiffer) {
  // 1 + 2^-8 sits on a BF16 midpoint; three 2^-24 terms (half a float32 ULP each) decide it.
  // seq adds them one at a time and each addition ties back to even, so the midpoint stays
  // and rounds down to 1; pairwise sums them first (3 * 2^-24), which lifts the sum above.
  const double t = std::ldexp(1.0, -24);
  std::vector<Bf16> x{bf(1), bf(std::ldexp(1.0, -8)), bf(t), bf(t), bf(t)};
  std::vector<Bf16> w(x.size(), bf(1));
  EXPECT_EQ(eval("seq", x, w, std::nullopt).bits, 0x3f80);
  EXPECT_EQ(eval("pairwise", x, w, std::nullopt).bits, 0x3f81);
  const mpq_class exact = po::exact_dot_gmp(x, w, std::nullopt);
  EXPECT_EQ(po::round_to_bf16(exact).bits, 0x3f81);
  EXPECT_EQ(po::f32_sum(order("seq"), x, w), float(1 + std::ldexp(1.0, -8)));
  // pairwise: (1 + 2^-8) + 3 * 2^-24, 1.5 float32 ULPs, ties to the even neighbour 2 ULPs up.
  EXPECT_EQ(po::f32_sum(order("pairwise"), x, w), float(1 + std::ldexp(1.0, -8) + 4 * t));
}

TEST(OracleOrders, BlockedDiffersFromSeq) {
  // K = 32: block16 sums the last 16 terms of 2^-24 on their own (2^-20, exact) before adding
  // them to 1 + 2^-8; seq and block32 (one block) lose every one of the 30 small terms to ties.
  const double t = std::ldexp(1.0, -24);
  std::vector<Bf16> x{bf(1), bf(std::ldexp(1.0, -8))};
  while (x.size() < 32) x.push_back(bf(t));
  std::vector<Bf16> w(x.size(), bf(1));
  EXPECT_EQ(eval("seq", x, w, std::nullopt).bits, 0x3f80);
  EXPECT_EQ(eval("block32", x, w, std::nullopt).bits, 0x3f80);
  EXPECT_EQ(eval("block16", x, w, std::nullopt).bits, 0x3f81);
  EXPECT_EQ(po::round_to_bf16(po::exact_dot_gmp(x, w, std::nullopt)).bits, 0x3f81);
}

TEST(OracleOrders, Bf16BeforeBiasReproducesEquation5) {
  // z = x.w = 257/256, b = 1/256: bf(bf(z) + b) = 1 while the correctly rounded z + b = 129/128.
  std::vector<Bf16> x{bf(1), bf(std::ldexp(1.0, -8))}, w{bf(1), bf(1)};
  const Bf16 b = bf(std::ldexp(1.0, -8));
  EXPECT_EQ(po::exact_dot_gmp(x, w, b), mpq_class(129, 128));
  EXPECT_EQ(eval("seq+bf16-before-bias", x, w, b).bits, 0x3f80);
  EXPECT_EQ(eval("seq", x, w, b).bits, 0x3f81);
  EXPECT_EQ(po::round_to_bf16(po::exact_dot_gmp(x, w, b)).bits, 0x3f81);
  // Without a bias the two variants are the same computation.
  EXPECT_EQ(eval("seq+bf16-before-bias", x, w, std::nullopt).bits, eval("seq", x, w, std::nullopt).bits);
}

TEST(OracleOrders, EvalAllMatchesEachOrder) {
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> u(-1, 1);
  for (int trial = 0; trial < 20; ++trial) {
    const int K = 1 + int(rng() % 700);
    std::vector<Bf16> x(K), w(K);
    for (auto& v : x) v = psi::bf16_rne(float(u(rng)));
    for (auto& v : w) v = psi::bf16_rne(float(u(rng) / 64));
    const std::optional<Bf16> b = trial % 2 ? std::optional<Bf16>(psi::bf16_rne(float(u(rng) / 8))) : std::nullopt;
    const auto all = po::f32_eval_all(x, w, b);
    ASSERT_EQ(all.size(), po::f32_orders().size());
    for (std::size_t i = 0; i < all.size(); ++i)
      EXPECT_EQ(all[i].bits, po::f32_eval(po::f32_orders()[i], x, w, b).bits) << po::f32_orders()[i].name;
    // Blocks at least K long are one block: the same sum as seq.
    if (K <= 256) {
      EXPECT_EQ(po::f32_sum(order("block256"), x, w), po::f32_sum(order("seq"), x, w));
    }
  }
}
