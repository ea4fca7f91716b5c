#include "engine/ops/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "engine/error.h"
#include "engine/isa_dispatch.h"
#include "engine/official/attention_flash.h"
#include "engine/official/attention_math.h"
#include "engine/official/math_to_flash.h"
#include "engine/official/op_observer.h"
#include "engine/ops/gemm.h"
#include "engine/ops/reduce.h"
#include "engine/parallel.h"

namespace psi::ops {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr std::int64_t kQueryRowsPerTask = 16;

// Σ a[c]·b[c] over c < n in the reduce.h order (n ≤ kChunk here: one chunk, eight strided
// lanes, the lane tree, added to +0), vectorized as one vector of lanes. n is a multiple of 8.
// Run per vector level (engine/isa_dispatch.h), as axpy.
struct DotOrdered {
  [[gnu::always_inline]] static float run(const float* a, const float* b, std::int64_t n) {
    Lanes acc = {};
    for (std::int64_t c = 0; c < n; c += kLanes) {
      Lanes x, y;
      load_lanes(x, a + c);
      load_lanes(y, b + c);
      const Lanes prod = x * y;
      acc = acc + prod;
    }
    return 0.0f + lane_tree(acc);
  }
};

float dot_ordered(const float* a, const float* b, std::int64_t n) { return isa_dispatch<DotOrdered>(a, b, n); }

// o[c] += p·v[c], one float32 product and one float32 sum per channel.
struct Axpy {
  [[gnu::always_inline]] static void run(float p, const float* v, float* o, std::int64_t n) {
    for (std::int64_t c = 0; c < n; ++c) {
      const float t = p * v[c];
      o[c] = o[c] + t;
    }
  }
};

void axpy(float p, const float* v, float* o, std::int64_t n) { isa_dispatch<Axpy>(p, v, o, n); }

struct HeadData {
  std::vector<float> q, k, v;  // [Nq, d], [Nk, d], [Nk, d] float32; q and k scaled (MATH factor)
};

void widen_head(CBf16Mat src, std::int64_t h, std::int64_t d, float factor, bool scale,
                std::vector<float>& dst) {
  dst.resize(src.rows * d);
  for (std::int64_t r = 0; r < src.rows; ++r) {
    const Bf16* s = src.row(r) + h * d;
    float* o = dst.data() + r * d;
    for (std::int64_t c = 0; c < d; ++c) o[c] = scale ? s[c].to_float() * factor : s[c].to_float();
  }
}

void math_head(const HeadData& hd, std::int64_t Nq, std::int64_t Nk, std::int64_t d,
               const float* mask, std::int64_t mask_ld, Bf16Mat out_head) {
  std::vector<float> S(Nq * Nk, 0.0f);
  gemm_accumulate(CF32Mat{hd.q.data(), Nq, d, d}, CF32Mat{hd.k.data(), Nk, d, d}, F32Mat{S.data(), Nq, Nk, Nk});
  parallel_for((Nq + kQueryRowsPerTask - 1) / kQueryRowsPerTask, [&](std::int64_t t) {
    for (std::int64_t i = t * kQueryRowsPerTask; i < std::min(Nq, (t + 1) * kQueryRowsPerTask); ++i) {
      float* s = S.data() + i * Nk;
      if (mask)
        for (std::int64_t j = 0; j < Nk; ++j) s[j] = s[j] + mask[i * mask_ld + j];
      math_softmax_row(s, Nk);
    }
  });
  // P·V as [Nq, Nk] x ([d, Nk])ᵀ: V transposed so that keys are the reduced axis.
  std::vector<float> vt(d * Nk);
  for (std::int64_t j = 0; j < Nk; ++j)
    for (std::int64_t c = 0; c < d; ++c) vt[c * Nk + j] = hd.v[j * d + c];
  std::vector<float> O(Nq * d, 0.0f);
  gemm_accumulate(CF32Mat{S.data(), Nq, Nk, Nk}, CF32Mat{vt.data(), d, Nk, Nk}, F32Mat{O.data(), Nq, d, d});
  for (std::int64_t i = 0; i < Nq; ++i)
    for (std::int64_t c = 0; c < d; ++c) out_head.at(i, c) = bf16_rne(O[i * d + c]);
}

// One head of sdpa_online_update: every query row continues its running (m, l, o) over the
// keys of hd in tiles of key_tile.
void online_head(const HeadData& hd, std::int64_t Nq, std::int64_t Nk, std::int64_t d, std::int64_t h,
                 const SdpaOptions& opt, std::int64_t mask_ld, OnlineState st) {
  const std::int64_t T = opt.key_tile;
  parallel_for((Nq + kQueryRowsPerTask - 1) / kQueryRowsPerTask, [&](std::int64_t task) {
    std::vector<float> s(T);
    for (std::int64_t i = task * kQueryRowsPerTask; i < std::min(Nq, (task + 1) * kQueryRowsPerTask); ++i) {
      const float* qi = hd.q.data() + i * d;
      float m = st.m.at(i, h), l = st.l.at(i, h);
      float* o = st.o.row(i) + h * d;
      for (std::int64_t j0 = 0; j0 < Nk; j0 += T) {
        const std::int64_t nt = std::min(T, Nk - j0);
        float tile_max = kNegInf;
        for (std::int64_t j = 0; j < nt; ++j) {
          float sj = dot_ordered(qi, hd.k.data() + (j0 + j) * d, d);
          if (opt.mask) sj = sj + opt.mask[i * mask_ld + j0 + j];
          s[j] = sj;
          tile_max = std::max(tile_max, sj);
        }
        const float m_new = std::max(m, tile_max);
        if (m_new == kNegInf) continue;  // every key so far is masked
        const float alpha = std::exp(m - m_new);
        for (std::int64_t j = 0; j < nt; ++j) s[j] = std::exp(s[j] - m_new);
        const float tile_sum = ordered_sum(nt, [&](std::int64_t j) { return s[j]; });
        l = l * alpha + tile_sum;
        if (alpha != 1.0f)
          for (std::int64_t c = 0; c < d; ++c) o[c] = o[c] * alpha;
        for (std::int64_t j = 0; j < nt; ++j) {
          const float pj = opt.p_bf16 ? bf(s[j]) : s[j];
          axpy(pj, hd.v.data() + (j0 + j) * d, o, d);
        }
        m = m_new;
      }
      st.m.at(i, h) = m;
      st.l.at(i, h) = l;
    }
  });
}

// The head width, after checking that q, k, v split into `heads` heads the kernels support.
std::int64_t head_width(CBf16Mat q, CBf16Mat k, CBf16Mat v, std::int64_t heads) {
  if (heads <= 0 || q.cols % heads != 0)
    throw Error("sdpa: width " + std::to_string(q.cols) + " does not split into " + std::to_string(heads) + " heads");
  const std::int64_t d = q.cols / heads;
  if (k.cols != q.cols || v.cols != q.cols || v.rows != k.rows)
    throw Error("sdpa: q is " + std::to_string(q.rows) + "x" + std::to_string(q.cols) + ", k " +
                std::to_string(k.rows) + "x" + std::to_string(k.cols) + ", v " + std::to_string(v.rows) +
                "x" + std::to_string(v.cols));
  if (d % kLanes != 0 || d > kChunk)
    throw Error("sdpa: head width " + std::to_string(d) + " must be a multiple of 8 and at most 1024");
  return d;
}

void check_state(const OnlineState& s, std::int64_t rows, std::int64_t heads, std::int64_t width) {
  if (s.m.rows != rows || s.m.cols != heads || s.l.rows != rows || s.l.cols != heads || s.o.rows != rows ||
      s.o.cols != width)
    throw Error("sdpa online state: m " + std::to_string(s.m.rows) + "x" + std::to_string(s.m.cols) + ", l " +
                std::to_string(s.l.rows) + "x" + std::to_string(s.l.cols) + ", o " + std::to_string(s.o.rows) +
                "x" + std::to_string(s.o.cols) + " for " + std::to_string(rows) + " rows of " +
                std::to_string(heads) + " heads, width " + std::to_string(width));
}

}  // namespace

void math_softmax_row(float* s, std::int64_t n) {
  float m = kNegInf;
  for (std::int64_t j = 0; j < n; ++j) m = std::max(m, s[j]);
  if (m == kNegInf) {  // safe softmax: a fully masked row attends to nothing
    std::fill(s, s + n, 0.0f);
    return;
  }
  for (std::int64_t j = 0; j < n; ++j) s[j] = std::exp(s[j] - m);
  const float l = ordered_sum(n, [&](std::int64_t j) { return s[j]; });
  for (std::int64_t j = 0; j < n; ++j) s[j] = s[j] / l;
}

void sdpa_online_begin(OnlineState s) {
  for (std::int64_t r = 0; r < s.m.rows; ++r) {
    std::fill(s.m.row(r), s.m.row(r) + s.m.cols, kNegInf);
    std::fill(s.l.row(r), s.l.row(r) + s.l.cols, 0.0f);
    std::fill(s.o.row(r), s.o.row(r) + s.o.cols, 0.0f);
  }
}

void sdpa_online_update(CBf16Mat q, CBf16Mat k, CBf16Mat v, std::int64_t heads, const SdpaOptions& opt,
                        OnlineState s) {
  const std::int64_t d = head_width(q, k, v, heads);
  if (opt.key_tile <= 0) throw Error("sdpa: key tile " + std::to_string(opt.key_tile) + " must be positive");
  check_state(s, q.rows, heads, q.cols);
  const float factor = official::sdpa_qk_factor(d);
  const std::int64_t mask_ld = opt.mask_ld > 0 ? opt.mask_ld : k.rows;
  for (std::int64_t h = 0; h < heads; ++h) {
    HeadData hd;
    widen_head(q, h, d, factor, true, hd.q);
    widen_head(k, h, d, factor, true, hd.k);
    widen_head(v, h, d, factor, false, hd.v);
    online_head(hd, q.rows, k.rows, d, h, opt, mask_ld, s);
  }
}

void sdpa_online_end(OnlineState s, Bf16Mat out) {
  const std::int64_t heads = s.m.cols;
  if (out.rows != s.o.rows || out.cols != s.o.cols || heads <= 0 || s.o.cols % heads != 0)
    throw Error("sdpa online end: output " + std::to_string(out.rows) + "x" + std::to_string(out.cols) +
                " for a state of " + std::to_string(s.o.rows) + "x" + std::to_string(s.o.cols));
  const std::int64_t d = s.o.cols / heads;
  for (std::int64_t i = 0; i < out.rows; ++i)
    for (std::int64_t h = 0; h < heads; ++h) {
      const float l = s.l.at(i, h);
      const float* o = s.o.row(i) + h * d;
      Bf16* y = out.row(i) + h * d;
      for (std::int64_t c = 0; c < d; ++c) y[c] = l == 0.0f ? Bf16{} : bf16_rne(o[c] / l);
    }
}

namespace {

// ops::sdpa without the observer's report.
void sdpa_unobserved(CBf16Mat q, CBf16Mat k, CBf16Mat v, std::int64_t heads, const SdpaOptions& opt,
                     Bf16Mat out) {
  const std::int64_t d = head_width(q, k, v, heads), Nq = q.rows, Nk = k.rows;
  if (out.rows != Nq || out.cols != q.cols)
    throw Error("sdpa: output is " + std::to_string(out.rows) + "x" + std::to_string(out.cols));
  if (opt.form == SoftmaxForm::online) {
    std::vector<float> m(Nq * heads), l(Nq * heads), o(Nq * q.cols);
    const OnlineState s{{m.data(), Nq, heads, heads}, {l.data(), Nq, heads, heads}, {o.data(), Nq, q.cols, q.cols}};
    sdpa_online_begin(s);
    sdpa_online_update(q, k, v, heads, opt, s);
    sdpa_online_end(s, out);
    return;
  }
  const std::int64_t mask_ld = opt.mask_ld > 0 ? opt.mask_ld : Nk;
  if (opt.core == AttentionCore::h200_math) {
    official::sdpa_math_h200(q, k, v, heads, opt.mask, mask_ld, official::ExpModel::ex2_table, out, opt.kernels.get());
    return;
  }
  if (opt.core == AttentionCore::h200_flash) {
    // PyTorch runs FLASH only without a mask (an attn_mask sends SDPA to another backend).
    if (opt.mask) throw Error("sdpa (h200 FLASH core): an additive mask (SDPA FLASH takes none)");
    official::sdpa_flash_h200(q, k, v, heads, out);
    return;
  }
  if (opt.core == AttentionCore::h200_math_to_flash) {
    if (opt.mask) throw Error("sdpa (MATH to FLASH): an additive mask (SDPA FLASH takes none)");
    official::sdpa_math_to_flash(q, k, v, heads, opt.flash_steps, out);
    return;
  }
  const float factor = official::sdpa_qk_factor(d);
  for (std::int64_t h = 0; h < heads; ++h) {
    HeadData hd;
    widen_head(q, h, d, factor, true, hd.q);
    widen_head(k, h, d, factor, true, hd.k);
    widen_head(v, h, d, factor, false, hd.v);
    math_head(hd, Nq, Nk, d, opt.mask, mask_ld, out.block(0, Nq, h * d, d));
  }
}

}  // namespace

void sdpa(CBf16Mat q, CBf16Mat k, CBf16Mat v, std::int64_t heads, const SdpaOptions& opt,
          Bf16Mat out) {
  sdpa_unobserved(q, k, v, heads, opt, out);
  if (official::OpObserver* o = official::op_observer())
    o->attention({official::op_site(), q, k, v, heads, opt.mask != nullptr, out, opt.kernels.get()});
}

}  // namespace psi::ops
