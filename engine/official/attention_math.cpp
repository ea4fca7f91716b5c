#include "engine/official/attention_math.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "engine/cpu_features.h"
#include "engine/error.h"
#include "engine/isa_dispatch.h"
#include "engine/official/kernel_config.h"
#include "engine/parallel.h"

namespace psi::official {

float sdpa_qk_factor(std::int64_t head_dim) {
  return float(std::sqrt(1.0 / std::sqrt(double(head_dim))));
}

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr std::int64_t kQueryRowsPerTask = 16;
constexpr int kWarpSize = 32;

// acc[j] = fma(a, b[j], acc[j]) for j < n: one step of n independent FMA chains (correctly
// rounded, so the bits do not depend on the vector level that runs it).
struct FmaStep {
  [[gnu::always_inline]] static void run(float a, const float* b, float* acc, std::int64_t n) {
    for (std::int64_t j = 0; j < n; ++j) acc[j] = std::fma(a, b[j], acc[j]);
  }
};

void fma_step(float a, const float* b, float* acc, std::int64_t n) { isa_dispatch<FmaStep>(a, b, acc, n); }

// fma_chains' tiles: kTileRows × W accumulators that stay in registers across c. fma_step
// loads and stores every accumulator at every step, which held the MATH core's products to
// about a third of the FMA rate.
constexpr int kTileRows = 4;
constexpr std::int64_t kTileDepth = 128;  // c per pass: a W-wide panel of B stays in L1

template <int W>
[[gnu::always_inline]] inline void fma_tile(const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
                                            std::int64_t c0, std::int64_t c1, float* C, std::int64_t ldc) {
  float acc[kTileRows][W];
  for (int r = 0; r < kTileRows; ++r)
    for (int j = 0; j < W; ++j) acc[r][j] = C[r * ldc + j];
  for (std::int64_t c = c0; c < c1; ++c) {
    const float* bc = b + c * ldb;
#pragma GCC unroll 4
    for (int r = 0; r < kTileRows; ++r) {
      const float ar = a[r * lda + c];
#pragma GCC unroll 64
      for (int j = 0; j < W; ++j) acc[r][j] = std::fma(ar, bc[j], acc[r][j]);
    }
  }
  for (int r = 0; r < kTileRows; ++r)
    for (int j = 0; j < W; ++j) C[r * ldc + j] = acc[r][j];
}

template <int W>
struct FmaTile {
  [[gnu::always_inline]] static void run(const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
                                         std::int64_t c0, std::int64_t c1, float* C, std::int64_t ldc) {
    fma_tile<W>(a, lda, b, ldb, c0, c1, C, ldc);
  }
};

void fma_tile_wide(const float* a, std::int64_t lda, const float* b, std::int64_t ldb, std::int64_t c0,
                   std::int64_t c1, float* C, std::int64_t ldc) {
  isa_dispatch<FmaTile<64>>(a, lda, b, ldb, c0, c1, C, ldc);
}

void fma_tile_narrow(const float* a, std::int64_t lda, const float* b, std::int64_t ldb, std::int64_t c0,
                     std::int64_t c1, float* C, std::int64_t ldc) {
  isa_dispatch<FmaTile<16>>(a, lda, b, ldb, c0, c1, C, ldc);
}

// s[j] = expf(s[j] − m) for j < n under the model.
void exp_minus(float* s, std::int64_t n, float m, ExpModel exp) {
  for (std::int64_t j = 0; j < n; ++j) s[j] = s[j] - m;
  if (exp == ExpModel::ex2_table) nv_expf_lanes(s, s, n);
  else
    for (std::int64_t j = 0; j < n; ++j) s[j] = nv_expf(s[j], exp);
}

// The warp softmax of one row of n ≤ 2,048 keys (softmax_warp_forward).
void warp_softmax_row(float* s, std::int64_t n, ExpModel exp) {
  float m = kNegInf;
  for (std::int64_t j = 0; j < n; ++j) m = m > s[j] ? m : s[j];
  if (m == kNegInf) {  // every key masked: _safe_softmax writes zeros over the kernel's NaN
    std::fill(s, s + n, 0.0f);
    return;
  }
  exp_minus(s, n, m, exp);
  const float sum = h200_softmax_sum(s, n);
  for (std::int64_t j = 0; j < n; ++j) s[j] = s[j] / sum;
}

// fmaxf over a row from m, in 16 lanes so that it vectorises: a maximum is the same in any order,
// and `x > m ? x : m` passes over a NaN as fmaxf does (which of two equal zeros it keeps cannot
// matter: the row's exponents take x − m, and e^(±0) is 1).
float row_fmax(const float* s, std::int64_t n, float m) {
  constexpr int kLanes = 16;
  float lane[kLanes];
  std::fill(lane, lane + kLanes, m);
  std::int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int l = 0; l < kLanes; ++l) lane[l] = s[j + l] > lane[l] ? s[j + l] : lane[l];
  for (; j < n; ++j) m = s[j] > m ? s[j] : m;
  for (float x : lane) m = x > m ? x : m;
  return m;
}

// cunn_SoftMaxForwardReg for one row of kWarpSoftmaxMaxKeys < n ≤ kRegSoftmaxMaxKeys keys.
void block_softmax_row(float* s, std::int64_t n, ExpModel exp) {
  // The kernel starts its max from the lowest finite float, not −∞, so a row of −∞ gives
  // 0 / 0 = NaN, which _safe_softmax replaces by zeros.
  if (std::all_of(s, s + n, [](float x) { return x == kNegInf; })) {
    std::fill(s, s + n, 0.0f);
    return;
  }
  const float m = row_fmax(s, n, std::numeric_limits<float>::lowest());  // ::max: fmaxf
  exp_minus(s, n, m, exp);  // the epilogue recomputes the same expf
  const float sum = h200_softmax_sum(s, n);
  for (std::int64_t j = 0; j < n; ++j) s[j] = s[j] / sum;
}

// Lane 0's value after WarpReduce: at each offset lane l adds lane l + offset (shfl_down); the
// lanes at or past 32 − offset that read themselves never reach lane 0.
float warp_reduce_lane0(float* v) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2)
    for (int l = 0; l < offset; ++l) v[l] = v[l] + v[l + offset];
  return v[0];
}

}  // namespace

void fma_chains(const float* a, std::int64_t lda, const float* b, std::int64_t ldb, std::int64_t c0, std::int64_t c1,
                float* C, std::int64_t ldc, std::int64_t rows, std::int64_t n, bool wide) {
  const std::int64_t W = wide ? 64 : 16;
  const auto tile = wide ? fma_tile_wide : fma_tile_narrow;
  for (std::int64_t k0 = c0; k0 < c1; k0 += kTileDepth) {
    const std::int64_t k1 = std::min(c1, k0 + kTileDepth);
    std::int64_t j0 = 0;
    for (; j0 + W <= n; j0 += W) {
      std::int64_t r0 = 0;
      for (; r0 + kTileRows <= rows; r0 += kTileRows)
        tile(a + r0 * lda, lda, b + j0, ldb, k0, k1, C + r0 * ldc + j0, ldc);
      for (std::int64_t c = k0; c < k1; ++c)
        for (std::int64_t r = r0; r < rows; ++r) fma_step(a[r * lda + c], b + c * ldb + j0, C + r * ldc + j0, W);
    }
    if (j0 < n)
      for (std::int64_t c = k0; c < k1; ++c)
        for (std::int64_t r = 0; r < rows; ++r) fma_step(a[r * lda + c], b + c * ldb + j0, C + r * ldc + j0, n - j0);
  }
}

float block_reduce_sum(const float* per_thread, int threads) {
  if (threads <= 0 || threads % kWarpSize != 0 || threads > kWarpSize * kWarpSize)
    throw Error("block_reduce_sum: " + std::to_string(threads) + " threads");
  float warp_sums[kWarpSize] = {};  // warps past the block's own count read the identity, +0
  for (int w = 0; w < threads / kWarpSize; ++w) {
    float lanes[kWarpSize];
    std::copy(per_thread + w * kWarpSize, per_thread + (w + 1) * kWarpSize, lanes);
    warp_sums[w] = warp_reduce_lane0(lanes);
  }
  return warp_reduce_lane0(warp_sums);
}

float warp_butterfly_sum(const float* lanes, int width) {
  float v[kWarpSize], next[kWarpSize];
  std::copy(lanes, lanes + width, v);
  for (int offset = width / 2; offset > 0; offset /= 2) {
    for (int l = 0; l < width; ++l) next[l] = v[l] + v[l ^ offset];
    std::copy(next, next + width, v);
  }
  return v[0];
}

float h200_softmax_sum(const float* e, std::int64_t n) {
  if (n <= kWarpSoftmaxMaxKeys) {
    int width = 1;
    while (width < n && width < kWarpSize) width *= 2;
    float lane[kWarpSize] = {};
    for (std::int64_t j = 0; j < n; ++j) lane[j % width] = lane[j % width] + e[j];  // lane j % W: its keys ascending
    return warp_butterfly_sum(lane, width);
  }
  if (n > kRegSoftmaxMaxKeys)
    throw Error("sdpa (h200 MATH core): softmax rows of " + std::to_string(n) + " keys (more than " +
                std::to_string(kRegSoftmaxMaxKeys) + ") take cunn_SoftMaxForwardSmem or cunn_SoftMaxForward, not modelled");
  float thread[kSoftmaxBlockThreads] = {};
  for (std::int64_t j = 0; j < n; ++j)  // thread t: keys t, t+1024, … in order
    thread[j % kSoftmaxBlockThreads] = thread[j % kSoftmaxBlockThreads] + e[j];
  return block_reduce_sum(thread, kSoftmaxBlockThreads);
}

void h200_softmax_row(float* s, std::int64_t n, ExpModel exp) {
  if (n <= kWarpSoftmaxMaxKeys) warp_softmax_row(s, n, exp);
  else if (n <= kRegSoftmaxMaxKeys) block_softmax_row(s, n, exp);
  else
    throw Error("sdpa (h200 MATH core): softmax rows of " + std::to_string(n) + " keys (more than " +
                std::to_string(kRegSoftmaxMaxKeys) + ") take cunn_SoftMaxForwardSmem or cunn_SoftMaxForward, not modelled");
}

void sdpa_math_h200(CBf16Mat q, CBf16Mat k, CBf16Mat v, std::int64_t heads, const float* mask,
                    std::int64_t mask_ld, ExpModel exp, Bf16Mat out, const KernelConfig* kernels) {
  if (heads <= 0 || q.cols % heads != 0 || k.cols != q.cols || v.cols != q.cols || v.rows != k.rows ||
      out.rows != q.rows || out.cols != q.cols)
    throw Error("sdpa (h200 MATH core): q " + std::to_string(q.rows) + "x" + std::to_string(q.cols) + ", k " +
                std::to_string(k.rows) + "x" + std::to_string(k.cols) + ", v " + std::to_string(v.rows) + "x" +
                std::to_string(v.cols) + ", out " + std::to_string(out.rows) + "x" + std::to_string(out.cols) +
                " for " + std::to_string(heads) + " heads");
  const std::int64_t d = q.cols / heads, Nq = q.rows, Nk = k.rows;
  const float factor = sdpa_qk_factor(d);
  const bool wide = have_avx512();  // where AVX-512 holds a wide tile
  // The K slices of the two batched products (kernel_config.h): each a chain from +0, the
  // partial sums added in slice order.
  const ProductShape score_shape{Nq, Nk, d}, value_shape{Nq, d, Nk};
  log_product(ChainKind::f32_scores, score_shape);
  log_product(ChainKind::f32_values, value_shape);
  const auto score_slices = k_slices(d, kernel_choice(kernels, ChainKind::f32_scores, score_shape));
  const auto value_slices = k_slices(Nk, kernel_choice(kernels, ChainKind::f32_values, value_shape));
  std::vector<float> qs(Nq * d), kt(d * Nk), vf(Nk * d);
  for (std::int64_t h = 0; h < heads; ++h) {
    // q' row-major, k' transposed (a score row is then Nk chains stepped together), v row-major.
    for (std::int64_t i = 0; i < Nq; ++i)
      for (std::int64_t c = 0; c < d; ++c) qs[i * d + c] = q.at(i, h * d + c).to_float() * factor;
    for (std::int64_t j = 0; j < Nk; ++j)
      for (std::int64_t c = 0; c < d; ++c) {
        kt[c * Nk + j] = k.at(j, h * d + c).to_float() * factor;
        vf[j * d + c] = v.at(j, h * d + c).to_float();
      }
    // A task's rows step their chains together (fma_chains), so that each slice of k' and each
    // row of v is read once per tile of rows; every output's chain keeps its own order.
    parallel_for((Nq + kQueryRowsPerTask - 1) / kQueryRowsPerTask, [&](std::int64_t t) {
      const std::int64_t i0 = t * kQueryRowsPerTask, rows = std::min(Nq, i0 + kQueryRowsPerTask) - i0;
      std::vector<float> s(rows * Nk, 0.0f), o(rows * d, 0.0f), part;
      for (std::size_t si = 0; si < score_slices.size(); ++si) {
        const auto [c0, c1] = score_slices[si];
        if (si > 0) part.assign(rows * Nk, 0.0f);
        fma_chains(qs.data() + i0 * d, d, kt.data(), Nk, c0, c1, si == 0 ? s.data() : part.data(), Nk, rows, Nk, wide);
        if (si > 0)
          for (std::size_t i = 0; i < s.size(); ++i) s[i] += part[i];
      }
      for (std::int64_t r = 0; r < rows; ++r) {
        float* sr = s.data() + r * Nk;
        if (mask)
          for (std::int64_t j = 0; j < Nk; ++j) sr[j] = sr[j] + mask[(i0 + r) * mask_ld + j];
        h200_softmax_row(sr, Nk, exp);
      }
      for (std::size_t si = 0; si < value_slices.size(); ++si) {
        const auto [j0, j1] = value_slices[si];
        if (si > 0) part.assign(rows * d, 0.0f);
        fma_chains(s.data(), Nk, vf.data(), d, j0, j1, si == 0 ? o.data() : part.data(), d, rows, d, wide);
        if (si > 0)
          for (std::size_t i = 0; i < o.size(); ++i) o[i] += part[i];
      }
      for (std::int64_t r = 0; r < rows; ++r) {
        Bf16* y = out.row(i0 + r) + h * d;
        for (std::int64_t c = 0; c < d; ++c) y[c] = bf16_rne(o[r * d + c]);
      }
    });
  }
}

}  // namespace psi::official
