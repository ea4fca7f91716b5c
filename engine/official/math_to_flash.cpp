#include "engine/official/math_to_flash.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "engine/bf16.h"
#include "engine/error.h"
#include "engine/official/attention_flash.h"
#include "engine/official/attention_math.h"
#include "engine/official/nv_expf.h"
#include "engine/official/tensor_core.h"
#include "engine/parallel.h"

namespace psi::official {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr std::int64_t kRowBlock = 32;  // query rows a task

constexpr const char* kStepNames[kMathToFlashSteps] = {"QK product", "exponent",   "row-sum order", "reciprocal",
                                                       "P to BF16",  "PV product", "key split"};

// One head's rows [i0, i0 + rows) through the first `steps` (≤ 6) steps, every key in one pass.
void head_rows(CBf16Mat q, CBf16Mat k, const std::vector<float>& kt_scaled, CBf16Mat vt, const std::vector<float>& vf,
               int steps, Bf16Mat out) {
  const bool tc_scores = steps >= 1, ex2_argument = steps >= 2, thread_sums = steps >= 3, late_normalize = steps >= 4,
             p_bf16 = steps >= 5, tc_pv = steps >= 6;
  const std::int64_t rows = q.rows, d = q.cols, Nk = k.rows;
  const float factor = sdpa_qk_factor(d), scale = float(1.0 / std::sqrt(double(d)));
  // FLASH's c on raw tensor-core scores; on MATH's scaled ones the same with the scale taken out.
  const float c = tc_scores ? float(double(scale) * 1.4426950408889634) : float(1.4426950408889634);
  std::vector<float> s(rows * Nk, 0.0f), o(rows * d, 0.0f), sums(rows);
  if (tc_scores) {
    tc::gemm_accumulate(q, k, F32Mat{s.data(), rows, Nk, Nk});
  } else {
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t ch = 0; ch < d; ++ch) {
        const float qs = q.at(r, ch).to_float() * factor;
        const float* kt = kt_scaled.data() + ch * Nk;
        float* sr = s.data() + r * Nk;
        for (std::int64_t j = 0; j < Nk; ++j) sr[j] = std::fma(qs, kt[j], sr[j]);
      }
  }
  const std::int64_t padded = (Nk + 7) / 8 * 8;
  std::vector<float> p(padded, 0.0f);
  std::vector<Bf16> pb(rows * Nk);
  for (std::int64_t r = 0; r < rows; ++r) {
    float* sr = s.data() + r * Nk;
    if (ex2_argument) {
      float m = kNegInf;
      for (std::int64_t j = 0; j < Nk; ++j) m = std::max(m, sr[j]);
      const float ms = m == kNegInf ? 0.0f : m * c;
      for (std::int64_t j = 0; j < Nk; ++j) p[j] = ex2_approx_ftz(sr[j] * c - ms);
    } else {
      if (tc_scores)
        for (std::int64_t j = 0; j < Nk; ++j) sr[j] = sr[j] * scale;
      float m = kNegInf;
      for (std::int64_t j = 0; j < Nk; ++j) m = std::max(m, sr[j]);
      for (std::int64_t j = 0; j < Nk; ++j) p[j] = nv_expf(sr[j] - m);
    }
    float sum;
    if (thread_sums) {
      float th[4];
      flash_thread_sums(p.data(), padded, true, 1.0f, th);
      sum = flash_row_sum(th);
    } else {
      sum = h200_softmax_sum(p.data(), Nk);
    }
    sums[std::size_t(r)] = sum;
    for (std::int64_t j = 0; j < Nk; ++j) {
      float x = late_normalize ? p[j] : p[j] / sum;
      if (p_bf16) {
        pb[r * Nk + j] = bf16_rne(x);
        x = pb[r * Nk + j].to_float();
      }
      sr[j] = x;
    }
  }
  if (tc_pv) {
    tc::gemm_accumulate(CBf16Mat{pb.data(), rows, Nk, Nk}, vt, F32Mat{o.data(), rows, d, d});
  } else {
    for (std::int64_t j = 0; j < Nk; ++j)
      for (std::int64_t r = 0; r < rows; ++r) {
        const float pj = s[r * Nk + j];
        const float* vj = vf.data() + j * d;
        float* orow = o.data() + r * d;
        for (std::int64_t ch = 0; ch < d; ++ch) orow[ch] = std::fma(pj, vj[ch], orow[ch]);
      }
  }
  for (std::int64_t r = 0; r < rows; ++r) {
    const float inv = 1.0f / sums[std::size_t(r)];
    for (std::int64_t ch = 0; ch < d; ++ch) {
      const float x = o[r * d + ch];
      out.at(r, ch) = bf16_rne(late_normalize ? x * inv : x);
    }
  }
}

}  // namespace

const char* math_to_flash_step_name(int step) {
  if (step < 1 || step > kMathToFlashSteps) throw Error("math_to_flash: no step " + std::to_string(step));
  return kStepNames[step - 1];
}

void sdpa_math_to_flash(CBf16Mat q, CBf16Mat k, CBf16Mat v, std::int64_t heads, int steps, Bf16Mat out) {
  if (steps < 0 || steps > kMathToFlashSteps)
    throw Error("sdpa (MATH to FLASH): " + std::to_string(steps) + " steps (0 to " +
                std::to_string(kMathToFlashSteps) + ")");
  if (steps == 0) return sdpa_math_h200(q, k, v, heads, nullptr, 0, ExpModel::ex2_table, out, nullptr);
  if (steps == kMathToFlashSteps) return sdpa_flash_h200(q, k, v, heads, out);
  if (heads <= 0 || q.cols % heads != 0 || k.cols != q.cols || v.cols != q.cols || v.rows != k.rows ||
      out.rows != q.rows || out.cols != q.cols)
    throw Error("sdpa (MATH to FLASH): q " + std::to_string(q.rows) + "x" + std::to_string(q.cols) + ", k " +
                std::to_string(k.rows) + "x" + std::to_string(k.cols) + ", v " + std::to_string(v.rows) + "x" +
                std::to_string(v.cols) + " for " + std::to_string(heads) + " heads");
  const std::int64_t d = q.cols / heads, Nq = q.rows, Nk = k.rows;
  const float factor = sdpa_qk_factor(d);
  // Per head: k' transposed (MATH's scores), v widened (MATH's P·V) and v transposed (the
  // tensor-core P·V).
  std::vector<std::vector<float>> kt(heads), vf(heads);
  const std::vector<Bf16> vt_data = transposed(v);
  const CBf16Mat vt{vt_data.data(), q.cols, Nk, Nk};
  for (std::int64_t h = 0; h < heads; ++h) {
    kt[h].resize(d * Nk);
    vf[h].resize(Nk * d);
    for (std::int64_t j = 0; j < Nk; ++j)
      for (std::int64_t c = 0; c < d; ++c) {
        kt[h][c * Nk + j] = k.at(j, h * d + c).to_float() * factor;
        vf[h][j * d + c] = v.at(j, h * d + c).to_float();
      }
  }
  const std::int64_t blocks = (Nq + kRowBlock - 1) / kRowBlock;
  parallel_for(heads * blocks, [&](std::int64_t task) {
    const std::int64_t h = task / blocks, i0 = (task % blocks) * kRowBlock, rows = std::min(kRowBlock, Nq - i0);
    head_rows(q.block(i0, rows, h * d, d), k.block(0, Nk, h * d, d), kt[h], vt.block(h * d, d, 0, Nk), vf[h], steps,
              out.block(i0, rows, h * d, d));
  });
}

}  // namespace psi::official
