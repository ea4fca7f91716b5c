// The SDPA MATH attention core as the H200 computed it (attention_math.h, nv_expf.h): the
// recorded official sdpa_out bit for bit from the recorded q, k, v; the count the correctly
// rounded expf stand-in reaches; the warp softmax against a literal lane-by-lane simulation of
// softmax_warp_forward; rows of more than 2,048 keys against a literal thread-by-thread
// simulation of cunn_SoftMaxForwardReg and its block reduction; the butterfly and block-tree
// orders and nv_expf on hand-checked values; the FMA-chain GEMMs against plain loops.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <optional>
#include <random>
#include <vector>

#include "engine/error.h"
#include "engine/model/variant.h"
#include "engine/official/attention_math.h"
#include "engine/official/nv_expf.h"
#include "engine/ops/attention.h"
#include "engine/parallel.h"
#include "engine/sha256.h"
#include "probes/probe_cases.h"
#include "probes/recording.h"
#include "tests/recordings.h"

namespace official = psi::official;
namespace ops = psi::ops;
using psi::Bf16Tensor;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

float from_bits(std::uint32_t b) { return std::bit_cast<float>(b); }
std::uint32_t bits(float f) { return std::bit_cast<std::uint32_t>(f); }

// The recorded MATH q, k, v and sdpa_out of the 64-dim audio self-attention probe.
struct Recorded {
  Bf16Tensor q, k, v;
  psi::probes::StoredTensor sdpa_out;
};

Recorded recorded() {
  psi::probes::Recording rec(psi::test::reference_file("probe_attn_traj.h5"), "probe_audio_self_attn");
  Recorded r{rec.stored_bf16("math/q").data, rec.stored_bf16("math/k").data, rec.stored_bf16("math/v").data,
             rec.stored_bf16("math/sdpa_out")};
  return r;
}

constexpr std::int64_t kRecordedHeads = 32;

Bf16Tensor run_h200(const Recorded& r, official::ExpModel exp) {
  Bf16Tensor out(r.q.shape);
  official::sdpa_math_h200(psi::as_matrix(r.q), psi::as_matrix(r.k), psi::as_matrix(r.v), kRecordedHeads, nullptr, 0, exp,
                      psi::as_matrix(out), nullptr);
  return out;
}

std::int64_t equal_count(const Bf16Tensor& a, const Bf16Tensor& b) {
  std::int64_t n = 0;
  for (std::int64_t i = 0; i < a.numel(); ++i) n += a.data[i].bits == b.data[i].bits;
  return n;
}

// softmax_warp_forward for one row, lane by lane as the kernel runs it: W lanes, lane l holding
// elements l, l+W, … (−∞ past the end), per-lane max then the xor butterfly on the max, per-lane
// sums then the xor butterfly on the sums (every lane adding its partner's value at once), and
// every element divided by its own lane's sum.
std::vector<float> literal_warp_softmax(const std::vector<float>& x, official::ExpModel exp) {
  const int n = int(x.size());
  const int pow2 = int(std::bit_ceil(unsigned(n)));
  const int W = std::min(pow2, 32), iters = pow2 / W;
  std::vector<std::vector<float>> e(W, std::vector<float>(iters));
  std::vector<float> mx(W), sum(W, 0.0f), tmp(W);
  for (int l = 0; l < W; ++l)
    for (int it = 0; it < iters; ++it) e[l][it] = l + it * W < n ? x[l + it * W] : -kInf;
  for (int l = 0; l < W; ++l) {
    mx[l] = e[l][0];
    for (int it = 1; it < iters; ++it) mx[l] = mx[l] > e[l][it] ? mx[l] : e[l][it];
  }
  for (int off = W / 2; off > 0; off /= 2) {
    for (int l = 0; l < W; ++l) tmp[l] = mx[l ^ off];
    for (int l = 0; l < W; ++l) mx[l] = mx[l] > tmp[l] ? mx[l] : tmp[l];
  }
  for (int l = 0; l < W; ++l)
    for (int it = 0; it < iters; ++it) {
      e[l][it] = official::nv_expf(e[l][it] - mx[l], exp);
      sum[l] += e[l][it];
    }
  for (int off = W / 2; off > 0; off /= 2) {
    for (int l = 0; l < W; ++l) tmp[l] = sum[l ^ off];
    for (int l = 0; l < W; ++l) sum[l] += tmp[l];
  }
  std::vector<float> out(n);
  for (int l = 0; l < W; ++l)
    for (int it = 0; it < iters; ++it)
      if (l + it * W < n) out[l + it * W] = e[l][it] / sum[l];
  return out;
}

// cunn_SoftMaxForwardReg for one row, thread by thread as the kernel runs it: 1,024 threads,
// thread t loading keys t + r·1024 into its registers r = 0 … ⌈n/1024⌉ − 1; per-thread max from
// the lowest float; the block max; per-thread sums of expf(x − max) from +0 in register order;
// the block sum as cuda_utils::BlockReduce forms it, simulated for every lane (shfl_down hands a
// lane whose source is past the warp its own value); every element expf(x − max) / sum, the
// kernel's NaN for a row of −∞ replaced by zeros as _safe_softmax does.
std::vector<float> literal_reg_softmax(const std::vector<float>& x, official::ExpModel exp) {
  constexpr int T = 1024, L = 32;
  const int n = int(x.size()), regs = (n + T - 1) / T;
  using Warp = std::array<float, L>;
  auto shfl_down_reduce = [&](Warp lane, bool is_max) {
    for (int off = L / 2; off > 0; off /= 2) {
      Warp next;
      for (int l = 0; l < L; ++l) {
        const float other = l + off < L ? lane[l + off] : lane[l];
        next[l] = is_max ? (lane[l] < other ? other : lane[l]) : lane[l] + other;
      }
      lane = next;
    }
    return lane[0];
  };
  auto block_reduce = [&](const std::vector<float>& per_thread, bool is_max, float identity) {
    Warp shared;
    shared.fill(identity);
    for (int w = 0; w < T / L; ++w) {
      Warp lanes;
      std::copy(per_thread.begin() + w * L, per_thread.begin() + (w + 1) * L, lanes.begin());
      shared[w] = shfl_down_reduce(lanes, is_max);
    }
    return shfl_down_reduce(shared, is_max);
  };
  std::vector<float> tmax(T, std::numeric_limits<float>::lowest()), texp(T, 0.0f);
  for (int t = 0; t < T; ++t)
    for (int r = 0; r < regs; ++r)
      if (t + r * T < n) tmax[t] = std::fmax(tmax[t], x[t + r * T]);
  const float m = block_reduce(tmax, true, std::numeric_limits<float>::lowest());
  for (int t = 0; t < T; ++t)
    for (int r = 0; r < regs; ++r)
      if (t + r * T < n) texp[t] = texp[t] + official::nv_expf(x[t + r * T] - m, exp);
  const float sum = block_reduce(texp, false, 0.0f);
  std::vector<float> out(n);
  for (int j = 0; j < n; ++j) {
    out[j] = official::nv_expf(x[j] - m, exp) / sum;
    if (std::isnan(out[j]) && std::all_of(x.begin(), x.end(), [](float v) { return v == -kInf; })) out[j] = 0.0f;
  }
  return out;
}

// One head of width d, written with plain loops: scores as FMA chains over the channels from +0,
// the given softmax per row, P·V as FMA chains over the keys from +0, BF16.
template <class Softmax>
Bf16Tensor plain_h200_head(const Bf16Tensor& q, const Bf16Tensor& k, const Bf16Tensor& v, const float* mask,
                           Softmax softmax) {
  const std::int64_t Nq = q.shape[0], Nk = k.shape[0], d = q.shape[1];
  const float s = official::sdpa_qk_factor(d);
  Bf16Tensor out({Nq, d});
  for (std::int64_t i = 0; i < Nq; ++i) {
    std::vector<float> row(Nk);
    for (std::int64_t j = 0; j < Nk; ++j) {
      float acc = 0.0f;
      for (std::int64_t c = 0; c < d; ++c)
        acc = std::fma(q.data[i * d + c].to_float() * s, k.data[j * d + c].to_float() * s, acc);
      row[j] = mask ? acc + mask[i * Nk + j] : acc;
    }
    softmax(row);
    for (std::int64_t c = 0; c < d; ++c) {
      float acc = 0.0f;
      for (std::int64_t j = 0; j < Nk; ++j) acc = std::fma(row[j], v.data[j * d + c].to_float(), acc);
      out.data[i * d + c] = psi::bf16_rne(acc);
    }
  }
  return out;
}

Bf16Tensor random_bf16(psi::Shape shape, float scale, std::mt19937& rng) {
  std::normal_distribution<float> n(0.0f, scale);
  Bf16Tensor t(std::move(shape));
  for (auto& x : t.data) x = psi::bf16_rne(n(rng));
  return t;
}

}  // namespace

TEST(OfficialAttention, RecordedSdpaOutBitwise) {
  const auto r = recorded();
  ASSERT_TRUE(r.sdpa_out.full);
  ASSERT_EQ(r.q.shape, (psi::Shape{1, 126, 2048}));
  const Bf16Tensor out = run_h200(r, official::ExpModel::ex2_table);
  EXPECT_EQ(equal_count(out, r.sdpa_out.data), 258048);
  EXPECT_EQ(psi::sha256_hex(out), r.sdpa_out.sha256_full);

  // The same through ops::sdpa with the official-h200 variant's options.
  const ops::SdpaOptions opt = psi::model::numerics_variant("official-h200").sdpa(64);
  EXPECT_EQ(opt.core, ops::AttentionCore::h200_math);
  Bf16Tensor via_sdpa(r.q.shape);
  ops::sdpa(psi::as_matrix(r.q), psi::as_matrix(r.k), psi::as_matrix(r.v), kRecordedHeads, opt,
            psi::as_matrix(via_sdpa));
  EXPECT_EQ(via_sdpa.data, out.data);
}

TEST(OfficialAttention, StandInCountsOnTheRecording) {
  const auto r = recorded();
  // A correctly rounded expf in the same core: the spec's 258,037–258,045 of 258,048.
  const std::int64_t stand_in = equal_count(run_h200(r, official::ExpModel::correctly_rounded), r.sdpa_out.data);
  EXPECT_EQ(stand_in, 258037);
  // psi's dense MATH core (reduce.h sums, std::exp), for scale.
  Bf16Tensor dense(r.q.shape);
  ops::sdpa(psi::as_matrix(r.q), psi::as_matrix(r.k), psi::as_matrix(r.v), kRecordedHeads, ops::SdpaOptions{},
            psi::as_matrix(dense));
  EXPECT_EQ(equal_count(dense, r.sdpa_out.data), 258022);
}

TEST(OfficialAttention, ThreadCountDoesNotMatter) {
  std::mt19937 rng(7);
  const Bf16Tensor q = random_bf16({37, 128}, 1.0f, rng), k = random_bf16({53, 128}, 1.0f, rng),
                   v = random_bf16({53, 128}, 1.0f, rng);
  Bf16Tensor a({37, 128}), b({37, 128});
  psi::set_thread_count(1);
  official::sdpa_math_h200(psi::as_matrix(q), psi::as_matrix(k), psi::as_matrix(v), 2, nullptr, 0,
                      official::ExpModel::ex2_table, psi::as_matrix(a), nullptr);
  psi::set_thread_count(3);
  official::sdpa_math_h200(psi::as_matrix(q), psi::as_matrix(k), psi::as_matrix(v), 2, nullptr, 0,
                      official::ExpModel::ex2_table, psi::as_matrix(b), nullptr);
  psi::set_thread_count(0);
  EXPECT_EQ(a.data, b.data);
}

// The SIMD lanes of the expf model are the scalar model: every 1,021st float32 bit pattern
// (all exponents, both signs, NaNs and infinities among them) and the boundaries by hand.
TEST(NvExpfLanes, EveryValueIsTheScalarModel) {
  std::vector<float> x;
  for (std::uint64_t b = 0; b < (1ull << 32); b += 1021) x.push_back(std::bit_cast<float>(std::uint32_t(b)));
  for (const float v : {0.0f, -0.0f, 1.0f, -1.0f, 127.0f, 128.0f, -126.0f, -127.0f, -150.0f, 88.7f, -87.3f, -103.9f,
                        std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                        std::numeric_limits<float>::denorm_min(), -std::numeric_limits<float>::denorm_min(),
                        std::numeric_limits<float>::quiet_NaN()})
    x.push_back(v);
  std::vector<float> ex2(x.size()), e(x.size());
  official::ex2_approx_ftz_lanes(x.data(), ex2.data(), std::int64_t(x.size()));
  official::nv_expf_lanes(x.data(), e.data(), std::int64_t(x.size()));
  std::int64_t ex2_off = 0, expf_off = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const auto xb = std::bit_cast<std::uint32_t>(x[i]);
    if (std::bit_cast<std::uint32_t>(ex2[i]) != std::bit_cast<std::uint32_t>(official::ex2_approx_ftz(x[i])))
      if (ex2_off++ < 3) ADD_FAILURE() << "ex2_approx_ftz_lanes at bits 0x" << std::hex << xb;
    if (std::bit_cast<std::uint32_t>(e[i]) != std::bit_cast<std::uint32_t>(official::nv_expf(x[i])))
      if (expf_off++ < 3) ADD_FAILURE() << "nv_expf_lanes at bits 0x" << std::hex << xb;
  }
  EXPECT_EQ(ex2_off, 0);
  EXPECT_EQ(expf_off, 0);
  // In place, as the softmax rows call them.
  std::vector<float> in_place = x;
  official::nv_expf_lanes(in_place.data(), in_place.data(), std::int64_t(in_place.size()));
  EXPECT_EQ(std::memcmp(in_place.data(), e.data(), e.size() * sizeof(float)), 0);
}

// The MATH core's products step their FMA chains in register tiles: both tile widths, and the
// rows and columns past the last whole tile, give each element the chain of the plain loop, one
// correctly rounded fma per c in ascending order from the element's starting value.
TEST(FmaChains, EveryTileWidthIsThePlainChain) {
  std::mt19937 gen(3);
  std::uniform_real_distribution<float> u(-3.0f, 3.0f);
  const std::int64_t rows = 7, n = 83, depth = 300, lda = depth + 5, ldb = n + 3, ldc = n + 1;
  std::vector<float> a(rows * lda), b(depth * ldb), start(rows * ldc);
  for (auto* v : {&a, &b, &start})
    for (auto& x : *v) x = u(gen);
  for (const auto& [c0, c1] : {std::pair<std::int64_t, std::int64_t>{0, depth}, {17, 211}, {5, 5}}) {
    std::vector<float> plain = start;
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t j = 0; j < n; ++j)
        for (std::int64_t c = c0; c < c1; ++c) plain[r * ldc + j] = std::fma(a[r * lda + c], b[c * ldb + j], plain[r * ldc + j]);
    for (const bool wide : {false, true}) {
      std::vector<float> tiled = start;
      official::fma_chains(a.data(), lda, b.data(), ldb, c0, c1, tiled.data(), ldc, rows, n, wide);
      for (std::int64_t i = 0; i < rows * ldc; ++i)
        ASSERT_EQ(std::bit_cast<std::uint32_t>(tiled[i]), std::bit_cast<std::uint32_t>(plain[i]))
            << "element " << i << (wide ? " (wide tiles)" : " (narrow tiles)") << ", c " << c0 << ".." << c1;
    }
  }
}

TEST(WarpSoftmax, ButterflyAddsPartnersNotInLaneOrder) {
  // Lane 0 holds 1; lanes 8 and 24 hold 2^-24 each. The butterfly adds lanes 8 and 24 first
  // (offset 16: 2^-23 in lane 8), then lane 8 into lane 0 (offset 8): 1 + 2^-23, exact. In lane
  // order each 2^-24 would be lost against 1 (a tie, to even): 1.
  float lanes[32] = {};
  lanes[0] = 1.0f;
  lanes[8] = lanes[24] = std::ldexp(1.0f, -24);
  EXPECT_EQ(official::warp_butterfly_sum(lanes, 32), 1.0f + std::ldexp(1.0f, -23));
  float seq = 0.0f;
  for (float x : lanes) seq += x;
  EXPECT_EQ(seq, 1.0f);
  // Lanes 1 and 17 meet at offset 16 (2) and reach lane 0 only at offset 1: 2^24 + 2, exact.
  // In lane order each 1 would be lost against 2^24 (ties to even): 2^24.
  float l2[32] = {};
  l2[0] = 16777216.0f;
  l2[1] = l2[17] = 1.0f;
  EXPECT_EQ(official::warp_butterfly_sum(l2, 32), 16777218.0f);
  // A narrower warp (rows of at most 16 keys): offsets 8, 4, 2, 1 only.
  float l3[16] = {};
  l3[0] = 1.0f;
  l3[4] = l3[12] = std::ldexp(1.0f, -24);
  EXPECT_EQ(official::warp_butterfly_sum(l3, 16), 1.0f + std::ldexp(1.0f, -23));
}

TEST(WarpSoftmax, MatchesTheLiteralKernel) {
  std::mt19937 rng(11);
  std::normal_distribution<float> n(0.0f, 4.0f);
  for (int len : {1, 2, 3, 7, 16, 17, 31, 32, 33, 64, 100, 126, 127, 128, 129, 300, 512, 777, 1024, 1025, 2048}) {
    std::vector<float> x(len);
    for (auto& v : x) v = n(rng);
    if (len > 3) x[len / 2] = -kInf;  // a masked key
    for (auto exp : {official::ExpModel::ex2_table, official::ExpModel::correctly_rounded}) {
      std::vector<float> mine = x;
      official::h200_softmax_row(mine.data(), len, exp);
      EXPECT_EQ(mine, literal_warp_softmax(x, exp)) << "n = " << len;
    }
  }
  std::vector<float> masked(50, -kInf);
  official::h200_softmax_row(masked.data(), 50, official::ExpModel::ex2_table);
  EXPECT_EQ(masked, std::vector<float>(50, 0.0f));  // _safe_softmax
}

TEST(NvExpf, Ex2TableOnHandCheckedValues) {
  // Integers: offset 0 in row 0, A = 2^25 → mantissa exactly 1.0; the integer is the exponent.
  for (int n = -126; n <= 127; ++n) EXPECT_EQ(official::ex2_approx_ftz(float(n)), std::ldexp(1.0f, n)) << n;
  EXPECT_EQ(official::ex2_approx_ftz(-127.0f), 0.0f);  // 2^-127 is subnormal: flushed
  EXPECT_EQ(official::ex2_approx_ftz(128.0f), kInf);
  EXPECT_EQ(official::ex2_approx_ftz(-200.0f), 0.0f);
  // 0.5: row 32, offset 0: A = 0x2d413cc, (A << 13 + 0x77e2) >> 15 = A >> 2 = 0xb504f3.
  EXPECT_EQ(bits(official::ex2_approx_ftz(0.5f)), 0x3fb504f3u);
  EXPECT_EQ(bits(official::ex2_approx_ftz(1.5f)), 0x403504f3u);
  // 1.5·2^-24 truncates to fixed-point 0 → exactly 1. Rounded (envytools) it would be one unit,
  // (2^38 + 0x58b9 + 0x77e2) >> 15 = 2^23 + 1: 1 + 2^-23.
  EXPECT_EQ(official::ex2_approx_ftz(from_bits(0x33c00000)), 1.0f);
  // Input flush: zeros and subnormals are 2^0.
  EXPECT_EQ(official::ex2_approx_ftz(std::numeric_limits<float>::denorm_min()), 1.0f);
  EXPECT_EQ(official::ex2_approx_ftz(-std::numeric_limits<float>::denorm_min()), 1.0f);
  EXPECT_EQ(official::ex2_approx_ftz(-0.0f), 1.0f);
  EXPECT_EQ(official::ex2_approx_ftz(-1e-30f), 1.0f);  // truncated to 0 as well
  EXPECT_EQ(official::ex2_approx_ftz(-kInf), 0.0f);
  EXPECT_EQ(official::ex2_approx_ftz(kInf), kInf);
  EXPECT_TRUE(std::isnan(official::ex2_approx_ftz(std::numeric_limits<float>::quiet_NaN())));
  // Within the documented 2 ulp of 2^x over [-2, 2].
  for (float x = -2.0f; x <= 2.0f; x += 0.0009765625f * 0.37f) {
    const double exact = std::exp2(double(x));
    const float got = official::ex2_approx_ftz(x);
    EXPECT_LE(std::fabs(got - exact), 2.0 * std::ldexp(1.0, std::ilogb(exact) - 23)) << x;
  }
}

TEST(NvExpf, ReductionAndBoundaries) {
  // x = 0: t = 0.5, j = 12582913 + 126, k = 0, r = +0, 2^0 · ex2(0) = 1.
  EXPECT_EQ(official::nv_expf_reduce(0.0f).k, 0);
  EXPECT_EQ(bits(official::nv_expf_reduce(0.0f).r), 0u);
  EXPECT_EQ(official::nv_expf(0.0f), 1.0f);
  EXPECT_EQ(official::nv_expf(-kInf), 0.0f);  // t saturates to 0, k = -126, r = -inf, ex2 = 0
  EXPECT_EQ(official::nv_expf(kInf), kInf);
  EXPECT_TRUE(std::isnan(official::nv_expf(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_EQ(official::nv_expf(89.0f), kInf);
  // k saturates at ±126: below, r carries the rest and the product goes subnormal (kept: the
  // multiply is IEEE, only ex2 flushes).
  EXPECT_EQ(official::nv_expf_reduce(-87.5f).k, -126);
  EXPECT_EQ(official::nv_expf_reduce(88.5f).k, 126);
  const float sub = official::nv_expf(-87.5f);
  EXPECT_GT(sub, 0.0f);
  EXPECT_LT(sub, std::numeric_limits<float>::min());
  EXPECT_LE(std::fabs(double(sub) - std::exp(-87.5)), std::ldexp(1.0, -149));
  EXPECT_EQ(official::nv_expf(-104.0f), 0.0f);  // e^-104 < 2^-150: rounds to 0
  // Across every k boundary in the softmax range, r + k is x·log2(e) and r stays within one
  // rounding of [0, 1); the result is within 2 ulp of e^x on both sides.
  for (int n = -125; n <= 0; ++n) {
    const float b = float(n / std::log2(std::exp(1.0)));
    for (float x : {std::nextafter(b, -kInf), b, std::nextafter(b, kInf)}) {
      const auto red = official::nv_expf_reduce(x);
      const double l = double(x) * std::log2(std::exp(1.0));
      EXPECT_NEAR(red.r + red.k, l, 1e-5) << x;
      EXPECT_GT(red.r, -1e-5) << x;
      EXPECT_LT(red.r, 1.0 + 1e-5) << x;
      const double exact = std::exp(double(x));
      EXPECT_LE(std::fabs(official::nv_expf(x) - exact), 2.0 * std::ldexp(1.0, std::ilogb(exact) - 23)) << x;
    }
  }
  // The stand-in is e^x correctly rounded.
  EXPECT_EQ(official::nv_expf(1.0f, official::ExpModel::correctly_rounded), from_bits(0x402df854));
}

TEST(BlockSoftmax, MatchesTheLiteralKernel) {
  std::mt19937 rng(13);
  std::normal_distribution<float> n(0.0f, 4.0f);
  for (int len : {2049, 2100, 3071, 3072, 4096, 4928, 5000, 8191, 9216}) {
    std::vector<float> x(len);
    for (auto& v : x) v = n(rng);
    x[len / 3] = -kInf;  // a masked key
    for (auto exp : {official::ExpModel::ex2_table, official::ExpModel::correctly_rounded}) {
      std::vector<float> mine = x;
      official::h200_softmax_row(mine.data(), len, exp);
      EXPECT_EQ(mine, literal_reg_softmax(x, exp)) << "n = " << len;
    }
  }
  std::vector<float> masked(3000, -kInf);
  official::h200_softmax_row(masked.data(), 3000, official::ExpModel::ex2_table);
  EXPECT_EQ(masked, std::vector<float>(3000, 0.0f));  // _safe_softmax over the kernel's NaN
  std::vector<float> too_long(official::kRegSoftmaxMaxKeys + 1, 0.0f);
  EXPECT_THROW(official::h200_softmax_row(too_long.data(), std::int64_t(too_long.size()), official::ExpModel::ex2_table),
               psi::Error);
}

TEST(BlockSoftmax, BlockReduceAddsInTreeOrder) {
  // Within a warp: lane 0 holds 1, lanes 8 and 24 hold 2^-24. Offset 16 adds lane 24 into lane
  // 8 (2^-23), offset 8 adds lane 8 into lane 0: 1 + 2^-23, exact. In thread order each 2^-24
  // would be lost against 1 (a tie, to even): 1.
  std::vector<float> t(1024, 0.0f);
  t[0] = 1.0f;
  t[8] = t[24] = std::ldexp(1.0f, -24);
  EXPECT_EQ(official::block_reduce_sum(t.data(), 1024), 1.0f + std::ldexp(1.0f, -23));
  // Across warps: warp 0 sums to 1, warps 8 and 24 to 2^-24 each; the second stage is the same
  // tree over the warp sums.
  std::fill(t.begin(), t.end(), 0.0f);
  t[0] = 1.0f;
  t[8 * 32 + 5] = t[24 * 32 + 31] = std::ldexp(1.0f, -24);
  EXPECT_EQ(official::block_reduce_sum(t.data(), 1024), 1.0f + std::ldexp(1.0f, -23));
  float seq = 0.0f;
  for (float v : t) seq += v;
  EXPECT_EQ(seq, 1.0f);
  // Inside a warp, lanes 1 and 17 meet at offset 16 and reach lane 0 at offset 1: 2^24 + 2.
  std::fill(t.begin(), t.end(), 0.0f);
  t[0] = 16777216.0f;
  t[1] = t[17] = 1.0f;
  EXPECT_EQ(official::block_reduce_sum(t.data(), 1024), 16777218.0f);
  // A block of fewer warps pads the second stage with +0.
  EXPECT_EQ(official::block_reduce_sum(t.data(), 64), 16777218.0f);
  EXPECT_THROW(official::block_reduce_sum(t.data(), 48), psi::Error);
}

TEST(OfficialAttention, RowLengthPicksTheKernel) {
  // 2,048 keys: the warp softmax; 2,049 and 4,928 (the full-size video self-attention):
  // cunn_SoftMaxForwardReg. The GEMMs are FMA chains in all, checked against plain loops.
  std::mt19937 rng(5);
  for (std::int64_t nk : {2048, 2049, 4928}) {
    const Bf16Tensor q = random_bf16({5, 64}, 1.5f, rng), k = random_bf16({nk, 64}, 1.5f, rng),
                     v = random_bf16({nk, 64}, 1.0f, rng);
    std::vector<float> mask(5 * nk, 0.0f);
    for (std::int64_t j = 0; j < nk; ++j) mask[1 * nk + j] = -kInf;  // row 1 fully masked
    for (std::int64_t j = 0; j < nk; j += 3) mask[2 * nk + j] = -kInf;
    Bf16Tensor got({5, 64});
    official::sdpa_math_h200(psi::as_matrix(q), psi::as_matrix(k), psi::as_matrix(v), 1, mask.data(), nk,
                        official::ExpModel::ex2_table, psi::as_matrix(got), nullptr);
    const Bf16Tensor want = plain_h200_head(q, k, v, mask.data(), [&](std::vector<float>& row) {
      if (nk > official::kWarpSoftmaxMaxKeys) row = literal_reg_softmax(row, official::ExpModel::ex2_table);
      else if (std::all_of(row.begin(), row.end(), [](float x) { return x == -kInf; }))
        std::fill(row.begin(), row.end(), 0.0f);  // _safe_softmax over the kernel's NaN
      else row = literal_warp_softmax(row, official::ExpModel::ex2_table);
    });
    EXPECT_EQ(got.data, want.data) << nk << " keys";
    for (std::int64_t c = 0; c < 64; ++c) EXPECT_EQ(got.data[64 + c].bits, 0) << "masked row";
  }
}
