#include "engine/official/attention_math.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "engine/error.h"
#include "engine/isa_clones.h"
#include "engine/official/kernel_config.h"
#include "engine/parallel.h"

namespace psi::official {

float sdpa_qk_factor(std::int64_t head_dim) {
  return float(std::sqrt(1.0 / std::sqrt(double(head_dim))));
}

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr std::int64_t kQueryRowsPerTask = 16;
constexpr std::int64_t kKeyBlock = 512;  // scores per row and step: the task's rows stay in L1
constexpr int kWarpSize = 32;

// acc[j] = fma(a, b[j], acc[j]) for j < n: one step of n independent FMA chains (correctly
// rounded, so the bits do not depend on which clone runs).
PSI_ISA_CLONES
void fma_step(float a, const float* b, float* acc, std::int64_t n) {
  for (std::int64_t j = 0; j < n; ++j) acc[j] = std::fma(a, b[j], acc[j]);
}

// The warp softmax of one row of n ≤ 2,048 keys (softmax_warp_forward).
void warp_softmax_row(float* s, std::int64_t n, ExpModel exp) {
  float m = kNegInf;
  for (std::int64_t j = 0; j < n; ++j) m = m > s[j] ? m : s[j];
  if (m == kNegInf) {  // every key masked: _safe_softmax writes zeros over the kernel's NaN
    std::fill(s, s + n, 0.0f);
    return;
  }
  for (std::int64_t j = 0; j < n; ++j) s[j] = nv_expf(s[j] - m, exp);
  const float sum = h200_softmax_sum(s, n);
  for (std::int64_t j = 0; j < n; ++j) s[j] = s[j] / sum;
}

// cunn_SoftMaxForwardReg for one row of kWarpSoftmaxMaxKeys < n ≤ kRegSoftmaxMaxKeys keys.
void block_softmax_row(float* s, std::int64_t n, ExpModel exp) {
  // The kernel starts its max from the lowest finite float, not −∞, so a row of −∞ gives
  // 0 / 0 = NaN, which _safe_softmax replaces by zeros.
  if (std::all_of(s, s + n, [](float x) { return x == kNegInf; })) {
    std::fill(s, s + n, 0.0f);
    return;
  }
  float m = std::numeric_limits<float>::lowest();
  for (std::int64_t j = 0; j < n; ++j) m = std::fmax(m, s[j]);  // ::max: fmaxf
  for (std::int64_t j = 0; j < n; ++j) s[j] = nv_expf(s[j] - m, exp);  // the epilogue recomputes the same expf
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
                    std::int64_t mask_ld, ExpModel exp, Bf16Mat out) {
  if (heads <= 0 || q.cols % heads != 0 || k.cols != q.cols || v.cols != q.cols || v.rows != k.rows ||
      out.rows != q.rows || out.cols != q.cols)
    throw Error("sdpa (h200 MATH core): q " + std::to_string(q.rows) + "x" + std::to_string(q.cols) + ", k " +
                std::to_string(k.rows) + "x" + std::to_string(k.cols) + ", v " + std::to_string(v.rows) + "x" +
                std::to_string(v.cols) + ", out " + std::to_string(out.rows) + "x" + std::to_string(out.cols) +
                " for " + std::to_string(heads) + " heads");
  const std::int64_t d = q.cols / heads, Nq = q.rows, Nk = k.rows;
  const float factor = sdpa_qk_factor(d);
  // The K slices of the two batched products (kernel_config.h): each a chain from +0, the
  // partial sums added in slice order.
  const ProductShape score_shape{Nq, Nk, d}, value_shape{Nq, d, Nk};
  log_product(ChainKind::f32_scores, score_shape);
  log_product(ChainKind::f32_values, value_shape);
  const auto score_slices = k_slices(d, kernel_config().choice(ChainKind::f32_scores, score_shape));
  const auto value_slices = k_slices(Nk, kernel_config().choice(ChainKind::f32_values, value_shape));
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
    // A task's rows step their chains together, so that each slice of k' and each row of v is
    // read once per task; every output's chain keeps its own order.
    parallel_for((Nq + kQueryRowsPerTask - 1) / kQueryRowsPerTask, [&](std::int64_t t) {
      const std::int64_t i0 = t * kQueryRowsPerTask, rows = std::min(Nq, i0 + kQueryRowsPerTask) - i0;
      std::vector<float> s(rows * Nk, 0.0f), o(rows * d, 0.0f), part;
      for (std::size_t si = 0; si < score_slices.size(); ++si) {
        const auto [c0, c1] = score_slices[si];
        if (si > 0) part.assign(rows * Nk, 0.0f);
        float* into = si == 0 ? s.data() : part.data();
        for (std::int64_t j0 = 0; j0 < Nk; j0 += kKeyBlock) {
          const std::int64_t nj = std::min(kKeyBlock, Nk - j0);
          for (std::int64_t c = c0; c < c1; ++c)
            for (std::int64_t r = 0; r < rows; ++r)
              fma_step(qs[(i0 + r) * d + c], kt.data() + c * Nk + j0, into + r * Nk + j0, nj);
        }
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
        float* into = si == 0 ? o.data() : part.data();
        for (std::int64_t j = j0; j < j1; ++j)
          for (std::int64_t r = 0; r < rows; ++r) fma_step(s[r * Nk + j], vf.data() + j * d, into + r * d, d);
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
