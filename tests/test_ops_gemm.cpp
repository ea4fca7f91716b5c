// GEMM / Linear: exactness on integer data, the documented reduction order, K-partition
// invariance at 1,024-aligned splits, independence of the thread count, bias rules.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

#include "engine/bf16_scan.h"
#include "engine/cpu_features.h"
#include "engine/error.h"
#include "engine/ops/gemm.h"
#include "engine/ops/reduce.h"
#include "engine/parallel.h"
#include "engine/synthinit.h"

namespace ops = psi::ops;
using psi::Bf16;
using psi::Bf16Tensor;

namespace {

// Small integers: every product and partial sum is an integer below 2^24, exact in float32,
// so any summation order must give the float64 result exactly.
Bf16Tensor integer_tensor(psi::Shape shape, int seed) {
  Bf16Tensor t(shape);
  for (std::int64_t i = 0; i < t.numel(); ++i) t.data[i] = psi::bf16_rne(float(int((i * 7 + seed * 13) % 17) - 8));
  return t;
}

// The order gemm.h documents, written out scalar: chunks of 1,024, eight strided lanes, tree.
float reference_dot(const Bf16* a, const Bf16* b, std::int64_t K) {
  return ops::ordered_sum(K, [&](std::int64_t k) { return a[k].to_float() * b[k].to_float(); });
}

struct ThreadGuard {
  ~ThreadGuard() { psi::set_thread_count(0); }
};

}  // namespace

TEST(Gemm, IntegerDataIsExact) {
  const std::int64_t M = 37, N = 45, K = 3001;  // several chunks, a tail that is not a multiple of 8
  Bf16Tensor x = integer_tensor({M, K}, 1), w = integer_tensor({N, K}, 2), b = integer_tensor({N}, 3);
  psi::F32Tensor y32({M, N});
  ops::linear_f32(psi::as_matrix(x), psi::as_matrix(w), b.ptr(), psi::as_matrix(y32));
  Bf16Tensor y = ops::linear(x, w, &b);
  for (std::int64_t m = 0; m < M; ++m)
    for (std::int64_t n = 0; n < N; ++n) {
      double exact = b.data[n].to_float();
      for (std::int64_t k = 0; k < K; ++k) exact += double(x.data[m * K + k].to_float()) * w.data[n * K + k].to_float();
      ASSERT_EQ(y32.data[m * N + n], float(exact)) << m << "," << n;
      ASSERT_EQ(y.data[m * N + n], psi::bf16_rne(float(exact))) << m << "," << n;
    }
}

TEST(Gemm, FollowsTheDocumentedOrder) {
  // N: a partial task block with an odd row (the AVX-512 kernel pairs W's rows); K: a last chunk
  // whose final group of eight is cut.
  const std::int64_t M = 9, N = 71, K = 2603;
  Bf16Tensor x = psi::synthinit::make("input.test.x", {M, K}, 5);
  Bf16Tensor w = psi::synthinit::make("test.weight", {N, K}, 5);
  psi::F32Tensor y({M, N});
  ops::linear_f32(psi::as_matrix(x), psi::as_matrix(w), nullptr, psi::as_matrix(y));
  for (std::int64_t m = 0; m < M; ++m)
    for (std::int64_t n = 0; n < N; ++n)
      ASSERT_EQ(y.data[m * N + n], reference_dot(x.ptr() + m * K, w.ptr() + n * K, K)) << m << "," << n;
}

TEST(Gemm, KSplitAtChunkBoundariesIsBitwiseNeutral) {
  const std::int64_t M = 20, N = 33, K = 4096 + 300;
  Bf16Tensor x = psi::synthinit::make("input.test.x", {M, K}, 7);
  Bf16Tensor w = psi::synthinit::make("test.weight", {N, K}, 7);
  std::vector<float> whole(M * N, 0.0f), parts(M * N, 0.0f);
  ops::gemm_accumulate(psi::as_matrix(x), psi::as_matrix(w), psi::F32Mat{whole.data(), M, N, N});
  // Slices of 1024, 2048 and the remainder, in order, into one accumulator.
  const std::int64_t cuts[] = {0, 1024, 3072, K};
  for (int s = 0; s < 3; ++s) {
    const std::int64_t k0 = cuts[s], kn = cuts[s + 1] - k0;
    ops::gemm_accumulate(psi::as_matrix(x).block(0, M, k0, kn), psi::as_matrix(w).block(0, N, k0, kn),
                         psi::F32Mat{parts.data(), M, N, N});
  }
  for (std::int64_t i = 0; i < M * N; ++i) ASSERT_EQ(std::bit_cast<std::uint32_t>(whole[i]), std::bit_cast<std::uint32_t>(parts[i])) << i;
}

TEST(Gemm, ThreadCountDoesNotChangeBits) {
  ThreadGuard guard;
  Bf16Tensor x = psi::synthinit::make("input.test.x", {130, 700}, 9);
  Bf16Tensor w = psi::synthinit::make("test.weight", {150, 700}, 9);
  Bf16Tensor b = psi::synthinit::make("test.bias", {150}, 9);
  psi::set_thread_count(1);
  Bf16Tensor y1 = ops::linear(x, w, &b);
  psi::set_thread_count(3);
  Bf16Tensor y3 = ops::linear(x, w, &b);
  EXPECT_EQ(y1.data, y3.data);
}

TEST(Gemm, BiasRules) {
  const std::int64_t M = 5, N = 40, K = 300;
  Bf16Tensor x = psi::synthinit::make("input.test.x", {M, K}, 11);
  Bf16Tensor w = psi::synthinit::make("test.weight", {N, K}, 11);
  Bf16Tensor b = psi::synthinit::make("test.bias", {N}, 11);
  Bf16Tensor fused = ops::linear(x, w, &b, psi::BiasRule::fused_f32);
  Bf16Tensor after = ops::linear(x, w, &b, psi::BiasRule::after_bf16);
  Bf16Tensor none = ops::linear(x, w, nullptr);
  int rule_matters = 0;
  for (std::int64_t m = 0; m < M; ++m)
    for (std::int64_t n = 0; n < N; ++n) {
      const float acc = reference_dot(x.ptr() + m * K, w.ptr() + n * K, K);
      const float bn = b.data[n].to_float();
      EXPECT_EQ(fused.data[m * N + n], psi::bf16_rne(acc + bn));
      EXPECT_EQ(after.data[m * N + n], psi::bf16_rne(psi::bf(acc) + bn));
      EXPECT_EQ(none.data[m * N + n], psi::bf16_rne(acc));
      rule_matters += fused.data[m * N + n] != after.data[m * N + n];
    }
  EXPECT_GT(rule_matters, 0);  // the two rules are distinguishable on this data
}

TEST(Gemm, BadShapesAreErrors) {
  Bf16Tensor x({4, 8}), w({3, 9}), b({2});
  EXPECT_THROW(ops::linear(x, w, nullptr), psi::Error);
  Bf16Tensor w2({3, 8});
  EXPECT_THROW(ops::linear(x, w2, &b), psi::Error);
}

namespace {

Bf16 from_bits(int bits) { return Bf16{std::uint16_t(bits)}; }

// Whether every product of a value with field fa and one with field fw (0: the subnormals) is
// finite and exact in FP32, tried over all significands of both.
bool every_product_exact(int fa, int fw) {
  for (int ma = 0; ma < 128; ++ma)
    for (int mw = 0; mw < 128; ++mw) {
      if ((fa == 0 && ma == 0) || (fw == 0 && mw == 0)) continue;
      const double p = double(from_bits(fa << 7 | ma).to_float()) * from_bits(fw << 7 | mw).to_float();
      if (!std::isfinite(float(p)) || double(float(p)) != p) return false;
    }
  return true;
}

bool predicate(int fa, int fw) {
  const Bf16 a = from_bits(fa << 7 | 1), w = from_bits(fw << 7 | 1);
  return psi::products_exact_in_fp32(psi::scan_bf16(psi::CBf16Mat{&a, 1, 1, 1}), psi::scan_bf16(psi::CBf16Mat{&w, 1, 1, 1}));
}

}  // namespace

// The fused kernel's precondition, against brute force at its edges: exact products at the
// bounds, an inexact or overflowing one just past them.
TEST(Gemm, FusedProductsAreExactExactlyWhereTheScanSaysSo) {
  const int pairs[][2] = {{60, 59}, {0, 118}, {118, 0}, {190, 190}, {254, 126}, {59, 59}, {0, 117}, {190, 191}, {254, 127}};
  for (const auto& [fa, fw] : pairs) EXPECT_EQ(predicate(fa, fw), every_product_exact(fa, fw)) << fa << "+" << fw;
  EXPECT_TRUE(every_product_exact(0, 118));
  EXPECT_FALSE(every_product_exact(0, 117));
  const Bf16 zero = from_bits(0), nan = from_bits(0x7fc0), big = from_bits(254 << 7);
  const auto one = [](const Bf16& v) { return psi::scan_bf16(psi::CBf16Mat{&v, 1, 1, 1}); };
  EXPECT_TRUE(psi::products_exact_in_fp32(one(zero), one(big)));  // every product is 0
  EXPECT_FALSE(psi::products_exact_in_fp32(one(nan), one(zero)));
}

// The scan at every vector level this CPU has is the portable loop's: one special value (infinity,
// NaN, a subnormal, the least and the greatest normal field, each of either sign) at the start,
// a vector's boundary or the tail of a row, in rows of several widths over a background of 1.0
// and zeros.
TEST(Gemm, TheScanIsTheSameAtEveryVectorLevel) {
  const auto same = [](const psi::Bf16Scan& a, const psi::Bf16Scan& b) {
    return a.finite == b.finite && a.lo == b.lo && a.hi == b.hi && a.subnormal == b.subnormal;
  };
  const std::uint16_t specials[] = {0x7f80, 0xff80, 0x7fc1, 0x0001, 0x8040, 0x0080, 0x8080, 0x7f7f, 0xff7f, 0x8000};
  int cases = 0;
  for (const int K : {1, 15, 16, 17, 31, 32, 33, 70})
    for (const int col : {0, 15, 16, 31, 32, K - 1}) {
      if (col >= K) continue;
      for (const std::uint16_t special : specials) {
        const int M = 3;
        std::vector<Bf16> m(std::size_t(M * K));
        for (std::size_t i = 0; i < m.size(); ++i) m[i] = from_bits(i % 3 == 2 ? 0 : 0x3f80);
        m[std::size_t(K + col)] = from_bits(special);
        const psi::CBf16Mat mat{m.data(), M, K, K};
        psi::Bf16Scan portable;
        {
          psi::ScopedIsa level(psi::Isa::portable);
          portable = psi::scan_bf16(mat);
        }
        const bool finite = (special & 0x7f80) != 0x7f80;
        ASSERT_EQ(portable.finite[1] != 0, finite) << special;
        for (const psi::Isa isa : {psi::Isa::avx2, psi::Isa::avx512}) {
          if (isa > psi::cpu_isa()) continue;
          psi::ScopedIsa level(isa);
          EXPECT_TRUE(same(psi::scan_bf16(mat), portable))
              << psi::isa_name(isa) << ": K " << K << ", column " << col << ", value 0x" << std::hex << special;
          ++cases;
        }
      }
    }
  if (cases == 0) GTEST_SKIP() << "this CPU has no vector level";
}

// psi's order with each product added by one FMA (what the fused kernel computes).
float fused_dot(const Bf16* a, const Bf16* b, std::int64_t K) {
  float total = 0.0f;
  for (std::int64_t c0 = 0; c0 < K; c0 += ops::kChunk) {
    float lane[ops::kLanes] = {};
    for (std::int64_t k = c0; k < std::min(K, c0 + ops::kChunk); ++k)
      lane[(k - c0) % ops::kLanes] = std::fma(a[k].to_float(), b[k].to_float(), lane[(k - c0) % ops::kLanes]);
    total = total + ops::lane_tree(lane);
  }
  return total;
}

// Operands whose products round (products near FP32's subnormal range): there an FMA gives other
// bits than a rounded product added, so the product must keep the unfused kernel and the
// documented order's bits. The same operands in range take the fused one (M: rows enough for
// it); both agree with the scalar order bit for bit.
TEST(Gemm, ProductsOutsideTheFusedRangeKeepTheirRounding) {
  const std::int64_t M = 40, N = 10, K = 1500;
  Bf16Tensor x = psi::synthinit::make("input.test.x", {M, K}, 13);
  Bf16Tensor w = psi::synthinit::make("test.weight", {N, K}, 13);
  // How many elements the fused order would give other bits; every element must be the
  // documented order's.
  const auto fused_differs = [&](const char* what) {
    psi::F32Tensor y({M, N});
    ops::linear_f32(psi::as_matrix(x), psi::as_matrix(w), nullptr, psi::as_matrix(y));
    int differs = 0;
    for (std::int64_t m = 0; m < M; ++m)
      for (std::int64_t n = 0; n < N; ++n) {
        const float ref = reference_dot(x.ptr() + m * K, w.ptr() + n * K, K);
        EXPECT_EQ(std::bit_cast<std::uint32_t>(y.data[m * N + n]), std::bit_cast<std::uint32_t>(ref)) << what << " " << m << "," << n;
        differs += std::bit_cast<std::uint32_t>(fused_dot(x.ptr() + m * K, w.ptr() + n * K, K)) != std::bit_cast<std::uint32_t>(ref);
      }
    return differs;
  };
  EXPECT_EQ(fused_differs("in range"), 0);
  for (Bf16& v : x.data) v = psi::bf16_rne(v.to_float() * 0x1p-64f);
  for (Bf16& v : w.data) v = psi::bf16_rne(v.to_float() * 0x1p-64f);
  EXPECT_GT(fused_differs("products near the subnormals"), 0);
}
