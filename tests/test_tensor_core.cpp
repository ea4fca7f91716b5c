// The H200 tensor-core product (engine/official/tensor_core.h) against an independent reference
// written here from the spec with other means: float64 values, std::ilogb, std::trunc and
// std::ldexp instead of integer fields, and a round-to-nearest conversion stepped back toward
// zero instead of assembling the float. Random and crafted cases: ties, cancellation,
// alignment beyond the kept bits, zeros, subnormals, overflow, Inf and NaN; the matrix form
// against the chain per element, thread counts, K splits, the epilogue.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <utility>
#include <vector>

#include "engine/bf16_scan.h"
#include "engine/error.h"
#include "engine/official/kernel_config.h"
#include "engine/official/tensor_core.h"
#include "engine/official/tensor_core_lanes.h"
#include "engine/parallel.h"

namespace official = psi::official;
namespace tc = psi::official::tc;
using psi::Bf16;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

double v(Bf16 b) { return double(b.to_float()); }

int align_exp(double a) { return std::max(std::ilogb(a), -126); }

// Truncation of a float64 value toward zero to float32.
float round_toward_zero(double x) {
  if (std::fabs(x) >= std::ldexp(1.0, 128)) return x < 0 ? -kInf : kInf;
  float f = float(x);
  if (std::fabs(double(f)) > std::fabs(x)) f = std::nextafter(f, 0.0f);
  return f;
}

float reference_dot(const std::vector<Bf16>& x, const std::vector<Bf16>& w, float acc = 0.0f) {
  bool nan = std::isnan(acc), pos = acc == kInf, neg = acc == -kInf, special = !std::isfinite(acc);
  for (std::size_t k = 0; k < x.size(); ++k) {
    const double p = v(x[k]) * v(w[k]);
    special |= !std::isfinite(v(x[k])) || !std::isfinite(v(w[k]));
    nan |= std::isnan(p);
    pos |= std::isinf(p) && p > 0;
    neg |= std::isinf(p) && p < 0;
  }
  if (special) {
    if (nan || (pos && neg)) return std::numeric_limits<float>::quiet_NaN();
    return pos ? kInf : -kInf;
  }
  for (std::size_t k0 = 0; k0 < x.size(); k0 += 16) {
    if (std::isinf(acc)) break;
    int E = -100000;
    for (std::size_t k = k0; k < std::min(x.size(), k0 + 16); ++k)
      if (v(x[k]) != 0 && v(w[k]) != 0) E = std::max(E, align_exp(std::fabs(v(x[k]))) + align_exp(std::fabs(v(w[k]))));
    if (acc != 0) E = std::max(E, align_exp(std::fabs(double(acc))));
    E = std::max(E, -133);
    std::int64_t T = 0;
    for (std::size_t k = k0; k < std::min(x.size(), k0 + 16); ++k)
      T += std::int64_t(std::trunc(std::ldexp(v(x[k]) * v(w[k]), 25 - E)));
    T += std::int64_t(std::trunc(std::ldexp(double(acc), 25 - E)));
    acc = T == 0 ? 0.0f : round_toward_zero(std::ldexp(double(T), E - 25));
  }
  return acc;
}

std::uint32_t bits(float f) { return std::bit_cast<std::uint32_t>(f); }

// NaNs compare by kind (any NaN), everything else bit for bit.
void expect_same(float got, float want, const char* what) {
  if (std::isnan(want)) {
    EXPECT_TRUE(std::isnan(got)) << what;
    return;
  }
  EXPECT_EQ(bits(got), bits(want)) << what << ": got " << got << ", want " << want;
}

// gemm_accumulate of A [M, K] and W [N, K] onto C0, each element against the defining chain; with
// `with_dot`, tc::dot of each pair of rows too.
void expect_product_is_the_chain(const std::vector<Bf16>& A, const std::vector<Bf16>& W, int M, int N, int K,
                                 const std::vector<float>& C0, bool with_dot) {
  std::vector<float> C = C0;
  tc::gemm_accumulate(psi::CBf16Mat{A.data(), M, K, K}, psi::CBf16Mat{W.data(), N, K, K},
                      psi::F32Mat{C.data(), M, N, N});
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      const std::vector<Bf16> xr(A.begin() + m * K, A.begin() + (m + 1) * K);
      const std::vector<Bf16> wr(W.begin() + n * K, W.begin() + (n + 1) * K);
      const float want = reference_dot(xr, wr, C0[std::size_t(m * N + n)]);
      expect_same(C[std::size_t(m * N + n)], want, "matrix element");
      if (with_dot) expect_same(tc::dot(xr, wr, C0[std::size_t(m * N + n)]), want, "dot");
    }
}

Bf16 b16(float f) { return psi::bf16_rne(f); }

// Random BF16 values whose exponents spread over `spread` binades around 2^0.
std::vector<Bf16> random_vec(std::mt19937& g, std::size_t n, int spread, double zero_share = 0.0) {
  std::uniform_real_distribution<double> m(1.0, 2.0), u(0.0, 1.0);
  std::uniform_int_distribution<int> e(-spread, spread);
  std::vector<Bf16> out(n);
  for (auto& b : out) {
    if (u(g) < zero_share) continue;
    const double s = u(g) < 0.5 ? -1.0 : 1.0;
    b = b16(float(s * std::ldexp(m(g), e(g))));
  }
  return out;
}

std::vector<Bf16> from_bits(std::initializer_list<std::uint16_t> l) {
  std::vector<Bf16> out;
  for (auto u : l) out.push_back(Bf16::from_bits(u));
  return out;
}

struct ThreadGuard {
  ~ThreadGuard() {
    psi::set_thread_count(0);
    tc::set_lane_kernel(tc::LaneKernel::best);
  }
};

}  // namespace

TEST(TensorCore, RandomChainsMatchTheReference) {
  std::mt19937 g(12);
  for (int spread : {0, 2, 6, 20, 60})
    for (std::size_t K : {1u, 15u, 16u, 17u, 64u, 333u, 2048u})
      for (int rep = 0; rep < 20; ++rep) {
        const auto x = random_vec(g, K, spread, rep % 4 == 0 ? 0.3 : 0.0);
        const auto w = random_vec(g, K, spread);
        expect_same(tc::dot(x, w), reference_dot(x, w), "random");
      }
}

TEST(TensorCore, CancellationLeavesOnlyTheTruncatedRest) {
  // Pairs that cancel exactly, plus one small product: the block sum is the small product
  // truncated at the alignment of the largest one.
  std::vector<Bf16> x(16), w(16, b16(1.0f));
  for (int i = 0; i < 14; i += 2) {
    x[i] = b16(std::ldexp(1.5f, 10 + i));
    x[i + 1] = b16(-std::ldexp(1.5f, 10 + i));
  }
  x[14] = b16(std::ldexp(1.0078125f, -8));  // 2^(-8) * (1 + 2^-7): 8 bits at 2^-15
  const float got = tc::dot(x, w);
  expect_same(got, reference_dot(x, w), "cancellation");
  // E = 22 (the 1.5 * 2^22 product sets it); the unit is 2^(E-25) = 2^-3, and
  // 2^-8 * 1.0078 truncates to 0: the whole block is exactly 0.
  EXPECT_EQ(bits(got), bits(0.0f));
}

TEST(TensorCore, TiesAndTheTwoExtraBits) {
  // One product at 2^0 sets E = 0: the unit is 2^-25. A product of 2^-25 survives, 2^-26 and
  // 1.5 * 2^-25 lose what lies below 2^-25 (truncation, not rounding: no tie goes up).
  for (float small : {std::ldexp(1.0f, -25), std::ldexp(1.0f, -26), std::ldexp(1.5f, -25), std::ldexp(1.75f, -24)}) {
    std::vector<Bf16> x = {b16(1.0f), b16(small)}, w = {b16(1.0f), b16(1.0f)};
    const float want = reference_dot(x, w);
    expect_same(tc::dot(x, w), want, "tie");
    const double exact = 1.0 + double(small);
    EXPECT_LE(double(want), exact);
    EXPECT_GT(double(want), exact - std::ldexp(1.0, -23));  // within one FP32 ulp, below
  }
  // The normalisation truncates too: 1 + 2^-23 + 2^-24 keeps 1 + 2^-23.
  std::vector<Bf16> x = {b16(1.0f), b16(std::ldexp(1.0f, -23)), b16(std::ldexp(1.0f, -24))}, w(3, b16(1.0f));
  EXPECT_EQ(tc::dot(x, w), 1.0f + std::ldexp(1.0f, -23));
  // A negative sum truncates toward zero as well.
  for (auto& b : x) b = b16(-b.to_float());
  EXPECT_EQ(tc::dot(x, w), -(1.0f + std::ldexp(1.0f, -23)));
}

TEST(TensorCore, AlignmentBeyondTheKeptBitsDropsTheTerm) {
  // A product 30 binades below the block's largest is shifted past its 27 bits: it vanishes,
  // even though the exact sum would differ from the large product.
  std::vector<Bf16> x = {b16(std::ldexp(1.0f, 20)), b16(std::ldexp(1.9921875f, -10))}, w(2, b16(1.0f));
  EXPECT_EQ(tc::dot(x, w), std::ldexp(1.0f, 20));
  expect_same(tc::dot(x, w), reference_dot(x, w), "far below");
  // The accumulator is aligned with the products: a large accumulator swallows a small block.
  std::vector<Bf16> small = {b16(std::ldexp(1.0f, -30))}, one = {b16(1.0f)};
  EXPECT_EQ(tc::dot(small, one, 1.0f), 1.0f);
  // ... and a small accumulator is truncated by a large block.
  const float acc = 1.0f + std::ldexp(1.0f, -20);
  std::vector<Bf16> big = {b16(std::ldexp(1.0f, 10))};
  expect_same(tc::dot(big, one, acc), reference_dot(big, one, acc), "acc truncated");
  EXPECT_EQ(tc::dot(big, one, acc), std::ldexp(1.0f, 10) + 1.0f);
}

TEST(TensorCore, ZerosTakeNoPartAndGivePositiveZero) {
  std::vector<Bf16> zeros(16), ones(16, b16(1.0f)), negzeros(16, b16(-0.0f));
  EXPECT_EQ(bits(tc::dot(zeros, ones)), bits(0.0f));
  EXPECT_EQ(bits(tc::dot(negzeros, ones)), bits(0.0f));
  EXPECT_EQ(bits(tc::dot(zeros, ones, -0.0f)), bits(0.0f));
  // Exact cancellation gives +0, not -0.
  std::vector<Bf16> x = {b16(-3.0f), b16(3.0f)}, w(2, b16(1.0f));
  EXPECT_EQ(bits(tc::dot(x, w)), bits(0.0f));
  // A zero product with a huge partner does not set E: the small product keeps its bits.
  std::vector<Bf16> x2 = {b16(std::ldexp(1.0f, 100)), b16(1.0078125f)}, w2 = {b16(0.0f), b16(1.0f)};
  EXPECT_EQ(tc::dot(x2, w2), 1.0078125f);
  // An all-zero block keeps the accumulator as it is.
  EXPECT_EQ(tc::dot(zeros, ones, 1.2345f), 1.2345f);
}

TEST(TensorCore, SubnormalOperandsAndAccumulators) {
  std::mt19937 g(5);
  std::uniform_int_distribution<int> mant(1, 127), sign(0, 1);
  auto subnormal = [&] { return Bf16::from_bits(std::uint16_t(mant(g) | (sign(g) << 15))); };
  for (int rep = 0; rep < 200; ++rep) {
    std::vector<Bf16> x(32), w(32);
    for (int k = 0; k < 32; ++k) {
      x[k] = rep % 3 == 0 ? subnormal() : b16(std::ldexp(float(mant(g)), -130 + rep % 40));
      w[k] = rep % 2 == 0 ? subnormal() : b16(std::ldexp(float(mant(g)), rep % 50 - 20));
    }
    const float acc = rep % 5 == 0 ? std::bit_cast<float>(std::uint32_t(0x00012345 + rep)) : 0.0f;
    expect_same(tc::dot(x, w, acc), reference_dot(x, w, acc), "subnormal");
  }
  // The alignment exponent is clamped at -133: products far below it vanish, and a result
  // below 2^-126 is truncated on the subnormal grid 2^-149.
  std::vector<Bf16> x = {Bf16::from_bits(0x0001)}, w = {b16(std::ldexp(1.0f, 100))};
  expect_same(tc::dot(x, w), reference_dot(x, w), "tiny x huge");
  std::vector<Bf16> x3 = {b16(std::ldexp(1.5f, -70)), b16(std::ldexp(1.25f, -75))}, w3 = {b16(std::ldexp(1.0f, -70)), b16(std::ldexp(1.0f, -70))};
  const float r = tc::dot(x3, w3);
  expect_same(r, reference_dot(x3, w3), "subnormal result");
  EXPECT_LT(std::fabs(r), std::ldexp(1.0f, -126));
  EXPECT_GT(std::fabs(r), 0.0f);
}

TEST(TensorCore, OverflowGivesInfinityThatStays) {
  const Bf16 big = b16(std::ldexp(1.5f, 127));
  std::vector<Bf16> x = {big, big}, w = {b16(1.0f), b16(1.0f)};
  EXPECT_EQ(tc::dot(x, w), kInf);
  for (auto& b : x) b = b16(-b.to_float());
  EXPECT_EQ(tc::dot(x, w), -kInf);
  // The published model's test: c = 2^127 plus a product of 2^127 overflows to +Inf.
  std::vector<Bf16> one = {b16(std::ldexp(1.0f, 127))}, unit = {b16(1.0f)};
  EXPECT_EQ(tc::dot(one, unit, std::ldexp(1.0f, 127)), kInf);
  // Once Inf, later blocks (even opposite ones) do not bring it back.
  std::vector<Bf16> x2(32, b16(std::ldexp(1.5f, 127))), w2(32, b16(1.0f));
  for (int k = 16; k < 32; ++k) x2[k] = b16(-std::ldexp(1.0f, 120));
  EXPECT_EQ(tc::dot(x2, w2), kInf);
  expect_same(tc::dot(x2, w2), reference_dot(x2, w2), "overflow then opposite");
  // Just below 2^128 truncates to the largest finite float.
  std::vector<Bf16> x3 = {b16(std::ldexp(1.9921875f, 127)), b16(std::ldexp(1.0f, 119))}, w3(2, b16(1.0f));
  expect_same(tc::dot(x3, w3), reference_dot(x3, w3), "near max");
  EXPECT_TRUE(std::isfinite(tc::dot(x3, w3)));
}

TEST(TensorCore, InfAndNanFollowThePublishedRule) {
  const std::uint16_t inf = 0x7f80, ninf = 0xff80, nan = 0x7fc0, one = 0x3f80, zero = 0x0000;
  auto run = [](std::initializer_list<std::uint16_t> x, std::initializer_list<std::uint16_t> w, float acc = 0.0f) {
    return tc::dot(from_bits(x), from_bits(w), acc);
  };
  EXPECT_EQ(run({inf, one}, {one, one}), kInf);
  EXPECT_EQ(run({ninf, one}, {one, one}), -kInf);
  EXPECT_EQ(run({inf, one}, {ninf, one}), -kInf);  // +Inf x -Inf is -Inf, not NaN
  EXPECT_TRUE(std::isnan(run({inf, ninf}, {one, one})));  // +Inf and -Inf products: NaN
  EXPECT_TRUE(std::isnan(run({inf, one}, {zero, one})));  // Inf x 0: NaN
  EXPECT_TRUE(std::isnan(run({nan, one}, {one, one})));
  EXPECT_TRUE(std::isnan(run({one}, {one}, std::numeric_limits<float>::quiet_NaN())));
  EXPECT_EQ(run({one}, {one}, -kInf), -kInf);
  EXPECT_TRUE(std::isnan(run({inf}, {one}, -kInf)));
  // A non-finite value late in the row decides the whole output.
  std::vector<Bf16> x(100, b16(1.0f)), w(100, b16(1.0f));
  x[99] = Bf16::from_bits(inf);
  EXPECT_EQ(tc::dot(x, w), kInf);
}

TEST(TensorCore, TraceHasOneStepPerBlockAndChains) {
  std::mt19937 g(3);
  const auto x = random_vec(g, 70, 4), w = random_vec(g, 70, 4);
  std::vector<tc::BlockStep> steps;
  const float r = tc::dot(x, w, 0.0f, &steps);
  ASSERT_EQ(steps.size(), 5u);
  EXPECT_EQ(steps.back().acc_out, r);
  for (std::size_t s = 0; s < steps.size(); ++s) {
    EXPECT_EQ(steps[s].k0, std::int64_t(16 * s));
    if (s > 0) {
      EXPECT_EQ(bits(steps[s].acc_in), bits(steps[s - 1].acc_out));
    }
    EXPECT_EQ(double(steps[s].acc_out) == 0.0, steps[s].sum == 0);
    // acc_out is T * 2^(E-25) with the dropped bits cut off.
    const double t = std::ldexp(double(steps[s].sum), steps[s].align_exp - 25);
    EXPECT_LE(std::fabs(double(steps[s].acc_out)), std::fabs(t));
    EXPECT_LT(std::fabs(t - double(steps[s].acc_out)),
              std::ldexp(1.0, steps[s].align_exp - 25 + steps[s].normalize_dropped));
  }
  EXPECT_EQ(steps.back().products, 6);
}

TEST(TensorCore, MatrixFormIsTheChainPerElement) {
  ThreadGuard guard;
  std::mt19937 g(9);
  for (auto [M, N, K] : {std::tuple{1, 1, 1}, {3, 9, 31}, {33, 70, 160}, {5, 130, 1000}}) {
    std::vector<Bf16> A, W;
    for (int m = 0; m < M; ++m) {
      auto r = random_vec(g, std::size_t(K), m % 2 ? 30 : 3, m % 3 == 0 ? 0.2 : 0.0);
      A.insert(A.end(), r.begin(), r.end());
    }
    for (int n = 0; n < N; ++n) {
      auto r = random_vec(g, std::size_t(K), n % 2 ? 3 : 30);
      W.insert(W.end(), r.begin(), r.end());
    }
    if (M > 3 && N > 5) {
      A[std::size_t(2 * K + K / 2)] = Bf16::from_bits(0x7f80);  // row 2 holds +Inf
      W[std::size_t(5 * K)] = Bf16::from_bits(0x7fc1);          // column 5 holds a NaN
    }
    std::vector<float> C0(std::size_t(M * N));
    for (auto& c : C0) c = float(std::uniform_real_distribution<double>(-4, 4)(g));
    if (M > 3 && N > 5) C0[std::size_t(N + 1)] = -kInf;
    for (auto [threads, kernel] : {std::pair{1, tc::LaneKernel::portable}, {2, tc::LaneKernel::avx2},
                                   {1, tc::LaneKernel::avx512}, {2, tc::LaneKernel::avx512_fp},
                                   {1, tc::LaneKernel::avx2_double}, {2, tc::LaneKernel::avx2_double},
                                   {2, tc::LaneKernel::best}}) {
      if (!tc::lane_kernel_available(kernel)) continue;
      psi::set_thread_count(threads);
      tc::set_lane_kernel(kernel);
      // The FP32-product kernel really runs here, on K of whole blocks and on K it pads.
      if (kernel == tc::LaneKernel::avx512_fp) {
        ASSERT_EQ(tc::lane_kernel_for(psi::CBf16Mat{A.data(), M, K, K}, psi::CBf16Mat{W.data(), N, K, K}), kernel);
      }
      expect_product_is_the_chain(A, W, M, N, K, C0, true);
    }
  }
}

// A thread keeps the rows of A it decoded for the tasks that follow in the same product; the next
// product decodes its own, even from the same buffer with the same shape.
TEST(TensorCore, EachProductDecodesItsOwnRows) {
  ThreadGuard guard;
  std::mt19937 g(21);
  const int M = 20, N = 300, K = 64;
  std::vector<Bf16> A, W;
  for (int n = 0; n < N; ++n) {
    auto r = random_vec(g, std::size_t(K), 3);
    W.insert(W.end(), r.begin(), r.end());
  }
  for (auto [threads, kernel] : {std::pair{1, tc::LaneKernel::portable}, {2, tc::LaneKernel::avx2},
                                 {1, tc::LaneKernel::avx512_fp}, {1, tc::LaneKernel::avx2_double},
                                 {2, tc::LaneKernel::avx2_double}}) {
    if (!tc::lane_kernel_available(kernel)) continue;
    psi::set_thread_count(threads);
    tc::set_lane_kernel(kernel);
    A.assign(std::size_t(M * K), Bf16{});
    for (int round = 0; round < 2; ++round) {
      // New values in the same buffer.
      for (auto& a : A) a = random_vec(g, 1, 3)[0];
      expect_product_is_the_chain(A, W, M, N, K, std::vector<float>(std::size_t(M * N), 0.0f), false);
    }
  }
}

// Scans made once for many products (as the FLASH core's tiles use them): a scan of a matrix
// holding the operand, from row0, gives the bits of the product's own scans. Here the holder's
// wider bounds (a subnormal and a NaN row outside the tile) take the FP32-product kernel away and a
// non-finite row inside sends its outputs to dot(); a scan that does not cover the operand is refused.
TEST(TensorCore, ScansOfAHolderGiveTheProductsOwnBits) {
  ThreadGuard guard;
  std::mt19937 g(21);
  const int M = 37, K = 160, Nall = 90, j0 = 40, N = 35;
  std::vector<Bf16> A, Wall;
  for (int m = 0; m < M; ++m) {
    auto r = random_vec(g, K, 6, m % 4 == 0 ? 0.25 : 0.0);
    A.insert(A.end(), r.begin(), r.end());
  }
  for (int n = 0; n < Nall; ++n) {
    auto r = random_vec(g, K, 6);
    Wall.insert(Wall.end(), r.begin(), r.end());
  }
  Wall[std::size_t(3 * K + 7)] = Bf16::from_bits(0x0003);                // subnormal, outside the tile
  Wall[std::size_t(80 * K + 1)] = Bf16::from_bits(0x7fc1);               // NaN row, outside the tile
  Wall[std::size_t((j0 + 9) * K + 100)] = Bf16::from_bits(0xff80);       // -Inf row, inside
  const psi::CBf16Mat a{A.data(), M, K, K}, wall{Wall.data(), Nall, K, K}, w{Wall.data() + j0 * K, N, K, K};
  std::vector<float> C0(std::size_t(M * N));
  for (auto& c : C0) c = float(std::uniform_real_distribution<double>(-8, 8)(g));
  const psi::Bf16Scan a_scan = psi::scan_bf16(a), wall_scan = psi::scan_bf16(wall);
  for (int threads : {1, 2}) {
    psi::set_thread_count(threads);
    std::vector<float> want = C0, got = C0;
    tc::gemm_accumulate(a, w, psi::F32Mat{want.data(), M, N, N});
    tc::gemm_accumulate(a, {a_scan}, w, {wall_scan, j0}, psi::F32Mat{got.data(), M, N, N});
    for (std::size_t i = 0; i < want.size(); ++i) expect_same(got[i], want[i], "element with a holder's scan");
  }
  if (tc::lane_kernel_available(tc::LaneKernel::avx512_fp)) {
    // The tile alone takes the FP32-product kernel, so the holder's scan really chose another.
    EXPECT_EQ(tc::lane_kernel_for(a, w), tc::LaneKernel::avx512_fp);
    EXPECT_EQ(tc::lane_kernel_for(a, wall), tc::LaneKernel::avx512);
  }
  std::vector<float> C = C0;
  const psi::F32Mat c{C.data(), M, N, N};
  EXPECT_THROW(tc::gemm_accumulate(a, {a_scan}, w, {wall_scan, Nall - N + 1}, c), psi::Error);
  EXPECT_THROW(tc::gemm_accumulate(a, {a_scan}, w, {wall_scan, -1}, c), psi::Error);
  EXPECT_THROW(tc::gemm_accumulate(a, {a_scan, 1}, w, {wall_scan, j0}, c), psi::Error);
}

// Every lane kernel against the reference on the cases the vector finish must hand to the
// scalar one or get right itself: a block sum that overflows 32 bits (16 largest products and an
// accumulator of the same sign and exponent), results that overflow to Inf and stay there,
// subnormal and underflowing results and accumulators, exact cancellation (+0), zero rows,
// exponents spread over ±120 binades, and the 16 columns of a panel each in another regime.
TEST(TensorCore, LaneKernelsAgreeOnTheEdges) {
  ThreadGuard guard;
  std::mt19937 g(21);
  constexpr int K = 48, N = 16;
  auto row = [&](float v) { return std::vector<Bf16>(K, b16(v)); };
  std::vector<std::vector<Bf16>> rows = {row(1.9921875f), row(-1.9921875f), row(0x1.fep+126f), row(0x1p-70f),
                                         row(0x1p-62f),   row(0.0f),        random_vec(g, K, 60),
                                         random_vec(g, K, 120), random_vec(g, K, 3, 0.5)};
  std::vector<Bf16> cancel = row(1.5f);
  for (int k = 0; k < K; k += 2) cancel[std::size_t(k)] = b16(-1.5f);
  rows.push_back(cancel);
  std::vector<std::vector<Bf16>> cols;
  for (int n = 0; n < N; ++n)
    cols.push_back(n < 6 ? rows[std::size_t(n)] : random_vec(g, K, n % 2 ? 60 : 8, n % 5 == 0 ? 0.3 : 0.0));
  const std::vector<float> accs = {0.0f, 1.9999999f, -1.9999999f, 0x1p-140f, -0x1p-130f, 3.0e38f, -0.0f, 7.25f};
  std::vector<Bf16> A, W;
  for (const auto& r : rows) A.insert(A.end(), r.begin(), r.end());
  for (const auto& c : cols) W.insert(W.end(), c.begin(), c.end());
  const int M = int(rows.size());
  for (float acc0 : accs) {
    std::vector<float> want(std::size_t(M * N));
    for (int m = 0; m < M; ++m)
      for (int n = 0; n < N; ++n) want[std::size_t(m * N + n)] = reference_dot(rows[std::size_t(m)], cols[std::size_t(n)], acc0);
    for (auto kernel : {tc::LaneKernel::portable, tc::LaneKernel::avx2, tc::LaneKernel::avx512, tc::LaneKernel::avx2_double}) {
      if (!tc::lane_kernel_available(kernel)) continue;
      tc::set_lane_kernel(kernel);
      std::vector<float> C(std::size_t(M * N), acc0);
      tc::gemm_accumulate(psi::CBf16Mat{A.data(), M, K, K}, psi::CBf16Mat{W.data(), N, K, K},
                          psi::F32Mat{C.data(), M, N, N});
      for (std::size_t i = 0; i < C.size(); ++i) expect_same(C[i], want[i], "edge case");
    }
  }
}

// The double-FMA kernel's E pass in bytes (tensor_core_lanes.h, ExponentBytes), taken where each
// operand's non-zero exponents span at most 63 binades and the int16 pass one binade wider, against
// the reference: operands with values at both ends of their span (the largest exponent sums and
// the smallest, each the only non-zero product of a block in some rows), zeros between them and
// rows of zeros, a span that ends in subnormals (counted at −126: there negative results truncate
// to −0), on an odd number of rows and a partial panel.
TEST(TensorCore, DoubleKernelTakesExponentBytesExactlyWhereTheSpansAllowThem) {
  if (!tc::lane_kernel_available(tc::LaneKernel::avx2_double)) GTEST_SKIP() << "AVX2 is not in force (this CPU, or PSI_ISA)";
  ThreadGuard guard;
  tc::set_lane_kernel(tc::LaneKernel::avx2_double);
  std::mt19937 g(58);
  constexpr int K = 64;
  std::uniform_int_distribution<int> mantissa(0, 127), pick(0, 1);
  // ±(1 + j/128)·2^e, exact in BF16; at e = −126 with `subnormal`, a subnormal (exponent −126 too).
  const auto value = [&](int e, bool subnormal) {
    const std::uint16_t sign = pick(g) ? 0x8000 : 0;
    if (subnormal && e == -126) return Bf16::from_bits(std::uint16_t(sign | std::max(1, mantissa(g))));
    return Bf16::from_bits(std::uint16_t(sign | (e + 127) << 7 | mantissa(g)));
  };
  const auto operand = [&](int rows, int lo, int hi, bool subnormal) {
    std::uniform_int_distribution<int> e(lo, hi);
    std::vector<Bf16> m(std::size_t(rows * K));
    for (int r = 0; r < rows; ++r)
      for (int k = 0; k < K; ++k) {
        Bf16& v = m[std::size_t(r * K + k)];
        switch (r % 6) {
          case 0: v = value(hi, subnormal); break;
          case 1: if (k % 16 == (k / 16 + r) % 16) v = value(lo, subnormal); break;
          case 2: v = value(k % 2 ? lo : hi, subnormal); break;
          case 3: if (k % 3) v = value(e(g), subnormal); break;
          case 4: break;
          default: if (k == 37) v = value(lo, subnormal);
        }
      }
    return m;
  };
  struct Span {
    int lo, hi;
    bool subnormal;
  };
  for (const Span a : {Span{-53, 10, false}, Span{-54, 10, false}, Span{-126, -63, true}, Span{-126, -62, true},
                       Span{30, 93, false}})
    for (const Span w : {Span{-65, -2, false}, Span{-66, -2, false}, Span{-40, 23, false}}) {
      const int M = 7, N = 19;
      const std::vector<Bf16> A = operand(M, a.lo, a.hi, a.subnormal), W = operand(N, w.lo, w.hi, w.subnormal);
      const psi::CBf16Mat am{A.data(), M, K, K}, wm{W.data(), N, K, K};
      const tc::ExponentBytes bytes = tc::exponent_bytes(psi::scan_bf16(am), psi::scan_bf16(wm));
      EXPECT_EQ(bytes.on, a.hi - a.lo <= 63 && w.hi - w.lo <= 63) << "A " << a.lo << ".." << a.hi << ", W " << w.lo << ".." << w.hi;
      // Accumulators whose last bits a block with no non-zero product keeps only where its E is
      // the accumulator's own: below the smallest exponent sum, and far below.
      const int exps[] = {a.hi + w.hi, a.lo + w.lo - 6, -100, -140};
      std::vector<float> C0(std::size_t(M * N));
      for (std::size_t i = 0; i < C0.size(); ++i)
        C0[i] = i % 5 == 0 ? 0.0f : float(std::ldexp(i % 2 ? 1.3333333 : -1.3333333, exps[i % 4]));
      expect_product_is_the_chain(A, W, M, N, K, C0, false);
    }
}

// The FP32-product kernel on the edges of the range where it runs (every x·w a normal FP32
// value: exponent sums from −100 to 125, no subnormal operand), against the reference: sums at
// both ends of that range, block sums that overflow 32 bits, exact cancellation, zero rows, terms
// truncated away entirely (exponents 120 binades apart in one block), and accumulators of every
// kind (huge, subnormal, −0). Operands outside the range go to the integer kernel, whole.
TEST(TensorCore, FloatProductKernelIsExactWhereItRuns) {
  if (!tc::lane_kernel_available(tc::LaneKernel::avx512_fp)) GTEST_SKIP() << "AVX-512 is not in force (this CPU, or PSI_ISA)";
  ThreadGuard guard;
  tc::set_lane_kernel(tc::LaneKernel::avx512_fp);
  std::mt19937 g(33);
  constexpr int K = 64, N = 16;
  auto row = [&](float v) { return std::vector<Bf16>(K, b16(v)); };
  auto mixed = [&](float big, float small) {
    std::vector<Bf16> r(K, b16(small));
    for (int k = 0; k < K; k += 16) r[std::size_t(k + 5)] = b16(big);
    return r;
  };
  const std::vector<std::vector<Bf16>> rows = {row(1.9921875f),      row(-1.9921875f),        row(0x1.fep+63f),
                                               row(-0x1p-50f),        row(0.0f),               mixed(0x1p+60f, 0x1p-50f),
                                               random_vec(g, K, 50),  random_vec(g, K, 3, 0.4),  random_vec(g, K, 20)};
  std::vector<std::vector<Bf16>> cols = {row(1.9921875f), row(0x1.fep+62f), row(0x1p-50f), row(-0x1.8p-50f),
                                         mixed(-0x1p+60f, 0x1p-49f)};
  std::vector<Bf16> cancel = row(1.5f);
  for (int k = 0; k < K; k += 2) cancel[std::size_t(k)] = b16(-1.5f);
  cols.push_back(cancel);
  while (int(cols.size()) < N) cols.push_back(random_vec(g, K, cols.size() % 2 ? 50 : 8, cols.size() % 3 == 0 ? 0.3 : 0.0));
  // Nine rows: two groups of four and one alone. Stored densely, and with rows 24 values apart
  // whose gaps hold NaNs, which no product may read.
  const int M = int(rows.size());
  for (const int ld : {K, K + 24}) {
    std::vector<Bf16> A(std::size_t(M * ld), Bf16::from_bits(0x7fc1)), W(std::size_t(N * ld), Bf16::from_bits(0x7fc1));
    for (int m = 0; m < M; ++m) std::copy(rows[std::size_t(m)].begin(), rows[std::size_t(m)].end(), A.begin() + m * ld);
    for (int n = 0; n < N; ++n) std::copy(cols[std::size_t(n)].begin(), cols[std::size_t(n)].end(), W.begin() + n * ld);
    const psi::CBf16Mat a{A.data(), M, K, ld}, w{W.data(), N, K, ld};
    ASSERT_EQ(tc::lane_kernel_for(a, w), tc::LaneKernel::avx512_fp);
    for (float acc0 : {0.0f, -0.0f, 1.9999999f, -3.5f, 0x1p-140f, -0x1p-120f, 3.0e38f, 0x1p+100f, 7.25f}) {
      std::vector<float> C(std::size_t(M * N), acc0);
      tc::gemm_accumulate(a, w, psi::F32Mat{C.data(), M, N, N});
      for (int m = 0; m < M; ++m)
        for (int n = 0; n < N; ++n)
          expect_same(C[std::size_t(m * N + n)], reference_dot(rows[std::size_t(m)], cols[std::size_t(n)], acc0),
                      "fp kernel");
    }
  }
  std::vector<Bf16> W;
  for (const auto& c : cols) W.insert(W.end(), c.begin(), c.end());
  const psi::CBf16Mat w{W.data(), N, K, K};
  // Just outside the range: a sum of exponents of 126 or −101, a subnormal operand.
  for (const std::vector<Bf16>& outside : {row(0x1p+64f), row(0x1p-51f), row(0x1p-130f)}) {
    const psi::CBf16Mat o{outside.data(), 1, K, K};
    EXPECT_EQ(tc::lane_kernel_for(o, w), tc::LaneKernel::avx512);
    std::vector<float> C(std::size_t(N), 0.0f);
    tc::gemm_accumulate(o, w, psi::F32Mat{C.data(), 1, N, N});
    for (int n = 0; n < N; ++n) expect_same(C[std::size_t(n)], reference_dot(outside, cols[std::size_t(n)]), "outside");
  }
}

// Which kernel a product gets depends on every element of both operands: one value out of the
// FP32-product range (an exponent sum over 125, a subnormal) anywhere, in any row, in a row's
// last partial group of 32 as well, sends the whole product to the integer kernel; a non-finite
// value does not (its outputs are recomputed by the scalar rule).
TEST(TensorCore, TheRangeScanSeesEveryElement) {
  if (!tc::lane_kernel_available(tc::LaneKernel::avx512_fp)) GTEST_SKIP() << "AVX-512 is not in force (this CPU, or PSI_ISA)";
  ThreadGuard guard;
  tc::set_lane_kernel(tc::LaneKernel::avx512_fp);
  psi::set_thread_count(2);
  for (const int K : {40, 64}) {
    const int M = 150;
    const std::vector<Bf16> W(std::size_t(16 * K), b16(0x1p+30f));
    const psi::CBf16Mat w{W.data(), 16, K, K};
    for (const int row : {0, 63, 64, 149})
      for (const int col : {0, 31, 32, K - 1})
        for (const auto& [value, kernel] : {std::pair{0x1p+96f, tc::LaneKernel::avx512}, {0x1p-130f, tc::LaneKernel::avx512},
                                             {kInf, tc::LaneKernel::avx512_fp}, {0x1p+95f, tc::LaneKernel::avx512_fp}}) {
          std::vector<Bf16> A(std::size_t(M * K), b16(1.0f));
          A[std::size_t(row * K + col)] = b16(value);
          EXPECT_EQ(tc::lane_kernel_for(psi::CBf16Mat{A.data(), M, K, K}, w), kernel)
              << "K " << K << " row " << row << " column " << col << " value " << value;
        }
  }
}

TEST(TensorCore, KSplitAtMultiplesOf16IsBitwiseNeutral) {
  std::mt19937 g(21);
  const int M = 7, N = 19, K = 96;
  const std::vector<Bf16> A = random_vec(g, M * K, 8), W = random_vec(g, N * K, 8);
  const psi::CBf16Mat a{A.data(), M, K, K}, w{W.data(), N, K, K};
  std::vector<float> whole(M * N, 0.0f), split(M * N, 0.0f);
  tc::gemm_accumulate(a, w, psi::F32Mat{whole.data(), M, N, N});
  for (int k0 : {0, 32, 48}) {
    const int kn = k0 == 0 ? 32 : k0 == 32 ? 16 : 48;
    tc::gemm_accumulate(a.block(0, M, k0, kn), w.block(0, N, k0, kn), psi::F32Mat{split.data(), M, N, N});
  }
  for (int i = 0; i < M * N; ++i) EXPECT_EQ(bits(split[i]), bits(whole[i])) << i;
}

TEST(TensorCore, LinearEpilogueAddsTheBiasInFloat32) {
  std::mt19937 g(4);
  const int M = 5, N = 11, K = 48;
  const std::vector<Bf16> A = random_vec(g, M * K, 5), W = random_vec(g, N * K, 5);
  const auto b = random_vec(g, N, 3);
  std::vector<Bf16> fused(M * N), after(M * N), none(M * N);
  tc::linear(psi::CBf16Mat{A.data(), M, K, K}, psi::CBf16Mat{W.data(), N, K, K}, b.data(), psi::BiasRule::fused_f32,
             psi::Bf16Mat{fused.data(), M, N, N}, nullptr);
  tc::linear(psi::CBf16Mat{A.data(), M, K, K}, psi::CBf16Mat{W.data(), N, K, K}, b.data(), psi::BiasRule::after_bf16,
             psi::Bf16Mat{after.data(), M, N, N}, nullptr);
  tc::linear(psi::CBf16Mat{A.data(), M, K, K}, psi::CBf16Mat{W.data(), N, K, K}, nullptr, psi::BiasRule::fused_f32,
             psi::Bf16Mat{none.data(), M, N, N}, nullptr);
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      const std::vector<Bf16> xr(A.begin() + m * K, A.begin() + (m + 1) * K), wr(W.begin() + n * K, W.begin() + (n + 1) * K);
      const float acc = reference_dot(xr, wr);
      EXPECT_EQ(fused[m * N + n], psi::bf16_rne(acc + b[n].to_float()));
      EXPECT_EQ(after[m * N + n], psi::bf16_rne(psi::bf(acc) + b[n].to_float()));
      EXPECT_EQ(none[m * N + n], psi::bf16_rne(acc));
    }
}

// The recorded split-K rule (official::recorded_choice): a one-row product over K = 4,096 is two chains from +0,
// one per half of K, added in FP32 before the epilogue; over K = 2,048, or with two rows, it is
// one chain. OfficialBlock.FullBlockTextCrossAttentionRowsAreBitwise is the recording's evidence.
TEST(TensorCore, OneRowProductOver4096IsSplitInTwo) {
  std::mt19937 g(5);
  const int N = 6;
  for (const auto& [M, K] : {std::pair{1, 4096}, std::pair{1, 2048}, std::pair{2, 4096}}) {
    const bool split = M == 1 && K == 4096;
    EXPECT_EQ(official::recorded_choice(official::ChainKind::tensor_core, {M, N, K}).split_k, split ? 2 : 1);
    const std::vector<Bf16> A = random_vec(g, std::size_t(M) * K, 5), W = random_vec(g, std::size_t(N) * K, 5);
    const auto b = random_vec(g, N, 3);
    std::vector<Bf16> y(std::size_t(M) * N);
    tc::linear(psi::CBf16Mat{A.data(), M, K, K}, psi::CBf16Mat{W.data(), N, K, K}, b.data(), psi::BiasRule::fused_f32,
               psi::Bf16Mat{y.data(), M, N, N}, nullptr);
    for (int m = 0; m < M; ++m)
      for (int n = 0; n < N; ++n) {
        const auto x0 = A.begin() + std::ptrdiff_t(m) * K, w0 = W.begin() + std::ptrdiff_t(n) * K;
        float acc = 0.0f;
        if (split) {
          const float lo = reference_dot({x0, x0 + K / 2}, {w0, w0 + K / 2});
          const float hi = reference_dot({x0 + K / 2, x0 + K}, {w0 + K / 2, w0 + K});
          acc = lo + hi;
        } else {
          acc = reference_dot({x0, x0 + K}, {w0, w0 + K});
        }
        EXPECT_EQ(y[std::size_t(m) * N + n], psi::bf16_rne(acc + b[n].to_float())) << M << "x" << K << " n " << n;
      }
  }
}

TEST(TensorCore, BadShapesAreErrors) {
  std::vector<Bf16> a(12), w(12);
  std::vector<float> c(9);
  EXPECT_THROW(tc::gemm_accumulate(psi::CBf16Mat{a.data(), 3, 4, 4}, psi::CBf16Mat{w.data(), 4, 3, 3},
                                   psi::F32Mat{c.data(), 3, 3, 3}),
               psi::Error);
  EXPECT_THROW(tc::gemm_accumulate(psi::CBf16Mat{a.data(), 3, 4, 4}, psi::CBf16Mat{w.data(), 3, 4, 4},
                                   psi::F32Mat{c.data(), 3, 2, 2}),
               psi::Error);
  EXPECT_THROW(tc::dot(std::vector<Bf16>(3), std::vector<Bf16>(4)), psi::Error);
}
