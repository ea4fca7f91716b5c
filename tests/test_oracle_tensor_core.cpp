// The h200-tensor-core order in the oracle: listed last among the orders, named by explain when
// it alone gives a candidate, and its trace (one step per 16-product block) accounts exactly for
// the distance between the accumulator and the exact sum.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "engine/official/tensor_core.h"
#include "oracle/exact_gmp.h"
#include "oracle/explain.h"
#include "oracle/f32_orders.h"
#include "oracle/rounding.h"
#include "oracle/tc_trace.h"

namespace po = psi::oracle;
namespace tc = psi::official::tc;
using psi::Bf16;

namespace {

const std::string kOrder = "h200-tensor-core";

std::size_t order_index(const std::string& name) {
  const auto& orders = po::f32_orders();
  for (std::size_t i = 0; i < orders.size(); ++i)
    if (orders[i].name == name) return i;
  throw std::runtime_error("no order " + name);
}

// A strongly cancelling dot product: the second half of w nearly negates the first, so the
// exact value is small next to the partial sums and the chain's truncations show in BF16.
void cancelling(std::mt19937_64& rng, int K, std::vector<Bf16>& x, std::vector<Bf16>& w) {
  std::uniform_real_distribution<double> u(-1, 1);
  x.assign(std::size_t(K), Bf16{});
  w.assign(std::size_t(K), Bf16{});
  const int h = K / 2;
  for (int k = 0; k < h; ++k) {
    x[k] = x[k + h] = psi::bf16_rne(float(u(rng)));
    w[k] = psi::bf16_rne(float(u(rng)));
    w[k + h] = psi::bf16_rne(-w[k].to_float() * float(1 + u(rng) / 64));
  }
  for (int k = 2 * h; k < K; ++k) x[k] = psi::bf16_rne(float(u(rng))), w[k] = psi::bf16_rne(float(u(rng) / 256));
}

// One output element as a LinearProblem: x one row, W one row.
po::LinearProblem one_element(const std::vector<Bf16>& x, const std::vector<Bf16>& w, std::optional<Bf16> b) {
  po::LinearProblem p;
  p.K = std::int64_t(x.size());
  p.rows = p.N = 1;
  p.x_shape = {1, p.K};
  p.x = psi::Bf16Tensor({1, p.K}, x);
  p.w = psi::Bf16Tensor({1, p.K}, w);
  if (b) p.b = psi::Bf16Tensor({1}, {*b});
  p.source.x = "x";
  p.source.w = "w";
  p.source.b = b ? "b" : "";
  return p;
}

mpq_class f32_mpq(float v) { return mpq_class(double(v)); }

}  // namespace

TEST(OracleTensorCore, ListedLastWithTheChainsAccumulator) {
  const auto& orders = po::f32_orders();
  ASSERT_FALSE(orders.empty());
  EXPECT_EQ(orders.back().name, kOrder);
  EXPECT_EQ(po::traceable_orders(), std::vector<std::string>{kOrder});
  std::mt19937_64 rng(5);
  std::vector<Bf16> x, w;
  for (int K : {1, 16, 33, 100}) {
    cancelling(rng, K, x, w);
    const float acc = tc::dot(x, w);
    EXPECT_EQ(po::f32_sum(orders.back(), x, w), acc);
    const Bf16 b = psi::bf16_rne(0.0625f);
    EXPECT_EQ(po::f32_eval(orders.back(), x, w, b), psi::bf16_rne(acc + b.to_float()));
    EXPECT_EQ(po::f32_eval(orders.back(), x, w, std::nullopt), psi::bf16_rne(acc));
    EXPECT_EQ(po::f32_eval_all(x, w, b).back(), psi::bf16_rne(acc + b.to_float()));
  }
}

TEST(OracleTensorCore, ExplainNamesItWhereItDiffersFromSeq) {
  // Search (fixed seed) a K = 32 element where the tensor core's BF16 differs from seq's and
  // from the correctly rounded value: explain must name h200-tensor-core, and only orders
  // giving that value.
  std::mt19937_64 rng(2024);
  std::vector<Bf16> x, w;
  const std::size_t tc_i = order_index(kOrder), seq_i = order_index("seq");
  for (int trial = 0; trial < 20000; ++trial) {
    cancelling(rng, 32, x, w);
    const std::optional<Bf16> b = psi::bf16_rne(float(trial % 7) / 1024);
    const auto values = po::f32_eval_all(x, w, b);
    const Bf16 correct = po::round_to_bf16(po::exact_dot_gmp(x, w, b));
    if (values[tc_i] == values[seq_i] || values[tc_i] == correct) continue;

    const auto p = one_element(x, w, b);
    const po::Explanation e = po::explain(p, 0, 0, {{"gpu", values[tc_i]}});
    ASSERT_EQ(e.candidates.size(), 1u);
    const auto& names = e.candidates[0].orders;
    EXPECT_NE(std::find(names.begin(), names.end(), kOrder), names.end());
    EXPECT_EQ(std::find(names.begin(), names.end(), "seq"), names.end());
    for (const auto& n : names) EXPECT_EQ(values[order_index(n)], values[tc_i]) << n;
    EXPECT_GT(e.candidates[0].ulps, 0);
    const std::string text = po::to_text(e);
    EXPECT_NE(text.find("  " + kOrder + " "), std::string::npos) << text;
    EXPECT_EQ(po::to_json(e)["float32_orders"][kOrder], po::bf16_hex(values[tc_i]));
    return;
  }
  FAIL() << "no K = 32 element found where h200-tensor-core differs from seq and the correct value";
}

TEST(OracleTensorCore, TraceLossesAddUpExactly) {
  std::mt19937_64 rng(77);
  std::vector<Bf16> x, w;
  int with_losses = 0;
  for (int trial = 0; trial < 60; ++trial) {
    const int K = 1 + int(rng() % 150);
    cancelling(rng, K, x, w);
    const std::optional<Bf16> b =
        trial % 3 ? std::optional<Bf16>(psi::bf16_rne(float(int(rng() % 200) - 100) / 4096)) : std::nullopt;
    const auto p = one_element(x, w, b);
    const po::Explanation e = po::explain(p, 0, 0, {{"model", po::f32_eval_all(x, w, b).back()}});
    const po::TcTrace t = po::trace_tensor_core(p, e);

    ASSERT_EQ(t.steps.size(), std::size_t((K + tc::kBlock - 1) / tc::kBlock)) << K;
    EXPECT_EQ(t.acc, tc::dot(x, w));
    EXPECT_EQ(t.exact_products, po::exact_dot_gmp(x, w, std::nullopt));
    mpq_class losses = 0, prefix = 0;
    for (std::size_t s = 0; s < t.steps.size(); ++s) {
      const auto& st = t.steps[s];
      EXPECT_EQ(st.block.k0, std::int64_t(s) * tc::kBlock);
      const auto n = std::size_t(st.k_end - st.block.k0);
      ASSERT_LE(n, std::size_t(tc::kBlock));
      prefix += po::exact_dot_gmp(std::span(x).subspan(st.block.k0, n), std::span(w).subspan(st.block.k0, n),
                                  std::nullopt);
      // Each term truncated on its own loses less than one unit 2^(E-25); the FP32 truncation
      // of T toward zero loses less than 2^dropped units, with T's sign.
      mpq_class unit(1);
      if (st.block.align_exp >= 25) mpq_mul_2exp(unit.get_mpq_t(), unit.get_mpq_t(), st.block.align_exp - 25);
      else mpq_div_2exp(unit.get_mpq_t(), unit.get_mpq_t(), 25 - st.block.align_exp);
      EXPECT_LT(abs(st.loss_align), (st.block.products + 1) * unit);
      if (st.block.truncated_terms == 0) {
        EXPECT_EQ(st.loss_align, 0);
      }
      EXPECT_GE(sgn(st.loss_norm) * st.block.sum, 0);
      EXPECT_LT(abs(st.loss_norm), mpq_class(mpz_class(1) << st.block.normalize_dropped) * unit);
      EXPECT_EQ(st.exact_in - st.loss_align - st.loss_norm, f32_mpq(st.block.acc_out));
      losses += st.loss_align + st.loss_norm;
      EXPECT_EQ(st.deviation, losses);
      EXPECT_EQ(prefix - f32_mpq(st.block.acc_out), st.deviation);
      EXPECT_EQ(st.if_exact, po::round_to_bf16(t.exact_products - st.deviation + (b ? po::to_mpq(*b) : 0)));
    }
    // The exact final sum is the final accumulator plus every loss.
    EXPECT_EQ(t.exact_products, f32_mpq(t.acc) + losses);
    with_losses += sgn(losses) != 0;
    if (b) {
      EXPECT_EQ(f32_mpq(t.acc) + po::to_mpq(*b), f32_mpq(t.with_bias) + t.loss_bias);
    }
    EXPECT_EQ(t.result, e.order_values.back());
    EXPECT_EQ(t.correct, e.correct);
    ASSERT_EQ(t.targets.size(), 1u);
    EXPECT_TRUE(t.targets[0].reproduced);
    ASSERT_TRUE(t.targets[0].decided.has_value());
    // From the decided block on, exact later steps give the result.
    for (auto s = std::size_t(*t.targets[0].decided); s < t.steps.size(); ++s)
      EXPECT_EQ(t.steps[s].if_exact, t.result);
    EXPECT_EQ(t.departs.has_value(), psi::bf16_ulp_distance(t.result, t.correct) != 0);
    if (t.first_inexact) {
      EXPECT_NE(sgn(t.steps[*t.first_inexact].deviation), 0);
    } else {
      EXPECT_EQ(losses, 0);
    }
  }
  EXPECT_GT(with_losses, 10);  // the cancelling sums do exercise the truncations
}

TEST(OracleTensorCore, TraceNamesTheDeparture) {
  // An element the chain gets wrong: departs names a block (or the epilogue) and the text
  // shows one row per block.
  std::mt19937_64 rng(9);
  std::vector<Bf16> x, w;
  for (int trial = 0; trial < 20000; ++trial) {
    cancelling(rng, 64, x, w);
    const Bf16 model = psi::bf16_rne(tc::dot(x, w));
    if (model == po::round_to_bf16(po::exact_dot_gmp(x, w, std::nullopt))) continue;
    const auto p = one_element(x, w, std::nullopt);
    const po::Explanation e = po::explain(p, 0, 0, {{"official", model}});
    const po::TcTrace t = po::trace_tensor_core(p, e);
    ASSERT_TRUE(t.departs.has_value());
    ASSERT_TRUE(t.first_inexact.has_value());
    EXPECT_LE(*t.first_inexact, *t.departs);
    if (*t.departs < std::int64_t(t.steps.size())) {
      EXPECT_NE(t.steps[std::size_t(*t.departs)].if_exact, t.correct);
    }
    const std::string text = po::to_text(t);
    for (const char* row : {"\n  0     0..15 ", "\n  1     16..31 ", "\n  2     32..47 ", "\n  3     48..63 "})
      EXPECT_NE(text.find(row), std::string::npos) << row << "\n" << text;
    EXPECT_EQ(text.find("\n  4     64.."), std::string::npos) << text;
    EXPECT_NE(text.find("departs            block"), std::string::npos) << text;
    EXPECT_NE(text.find("candidate official " + po::bf16_hex(model) + ": reproduced"), std::string::npos) << text;
    return;
  }
  FAIL() << "no K = 64 element found where the chain is not correctly rounded";
}
