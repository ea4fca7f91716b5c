// The CUDA kernels' per-element arithmetic (engine/backend/cuda/element_math.h), compiled here by
// the host C++ compiler, against engine/ops bit for bit. No GPU and no CUDA build needed: this
// is the part of the CUDA backend's logic that a CPU can check. What it proves carries to the
// device because the kernels call these same functions, and every float32 operation in them is
// an explicitly rounded IEEE operation on both sides (element_math.h says why); exp and tanh are
// the host's here, so the activation tests pin the formulas, not CUDA's expf / tanhf.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/backend/cpu/cpu_kernels.h"
#include "engine/backend/cuda/element_math.h"
#include "engine/bf16.h"
#include "engine/official/attention_math.h"
#include "engine/ops/activation.h"
#include "engine/ops/adaln.h"
#include "engine/ops/attention.h"
#include "engine/ops/gemm.h"
#include "engine/ops/norm.h"
#include "engine/ops/reduce.h"
#include "engine/ops/rope.h"
#include "tests/cuda_attention_replay.h"

namespace psi {
namespace {

using u16 = std::uint16_t;

// Random finite, non-zero BF16 values: sign, a mantissa and an exponent spread over
// [2^-lo, 2^hi) so that products and sums round at every position.
class Source {
 public:
  explicit Source(std::uint64_t seed) : rng_(seed) {}
  Bf16 value(int lo = 6, int hi = 3) {
    std::uniform_int_distribution<int> e(127 - lo, 127 + hi - 1), m(0, 127), s(0, 1);
    return Bf16::from_bits(u16((s(rng_) << 15) | (e(rng_) << 7) | m(rng_)));
  }
  Bf16Tensor tensor(const Shape& shape, int lo = 6, int hi = 3) {
    Bf16Tensor t(shape);
    for (auto& v : t.data) v = value(lo, hi);
    return t;
  }
  float f32(float lo, float hi) { return std::uniform_real_distribution<float>(lo, hi)(rng_); }

 private:
  std::mt19937_64 rng_;
};

u16 bits(Bf16 v) { return v.bits; }

// ---- BF16 conversion --------------------------------------------------------------------------

TEST(CudaElementMath, RoundingEqualsBf16RneOnEveryFloatClass) {
  // Every upper half (every sign, exponent and kept mantissa: zeros, subnormals, normals, the
  // largest finite values, Inf, every NaN payload) with lower halves below, at and above the
  // tie, and at the extremes.
  const u16 lows[] = {0x0000, 0x0001, 0x3fff, 0x7fff, 0x8000, 0x8001, 0xc000, 0xffff};
  std::uint64_t ties = 0, subnormal = 0, zero = 0, inf = 0, nan = 0, overflow = 0, checked = 0;
  for (std::uint32_t hi = 0; hi < 0x10000; ++hi)
    for (u16 lo : lows) {
      const std::uint32_t u = (hi << 16) | lo;
      const float f = std::bit_cast<float>(u);
      const u16 got = em::round_bf16(f);
      ASSERT_EQ(got, bf16_rne(f).bits) << std::hex << "float bits 0x" << u;
      ++checked;
      const std::uint32_t exp = u & 0x7f800000u, man = u & 0x007fffffu;
      if (exp == 0x7f800000u) (man ? nan : inf) += 1;
      else if (exp == 0 && man == 0) ++zero;
      else if (exp == 0) ++subnormal;
      if (lo == 0x8000 && exp != 0x7f800000u) ++ties;
      if (exp != 0x7f800000u && (got & 0x7fff) == 0x7f80) ++overflow;
    }
  EXPECT_EQ(checked, 0x10000u * 8);
  // The classes were all visited (the loop above is the proof; these keep it honest).
  EXPECT_GT(ties, 60000u);
  EXPECT_GT(subnormal, 2000u);
  EXPECT_EQ(zero, 2u);
  EXPECT_EQ(inf, 2u);
  EXPECT_GT(nan, 2000u);
  EXPECT_GT(overflow, 0u);
}

TEST(CudaElementMath, WidenEqualsBf16ToFloatForAllValues) {
  for (std::uint32_t b = 0; b < 0x10000; ++b) {
    const float a = em::widen(u16(b)), e = Bf16::from_bits(u16(b)).to_float();
    ASSERT_EQ(std::bit_cast<std::uint32_t>(a), std::bit_cast<std::uint32_t>(e)) << "bf16 bits " << b;
    ASSERT_EQ(std::bit_cast<std::uint32_t>(em::bf(a)), std::bit_cast<std::uint32_t>(bf(a)));
  }
}

// ---- elementwise operators ------------------------------------------------------------------------

TEST(CudaElementMath, AdaValueModulateResidualsAreBitwise) {
  Source src(0x5eed'a0a1);
  const std::int64_t N = 37, D = 96;
  const Bf16Tensor table = src.tensor({1, D}), value = src.tensor({N, D}), x = src.tensor({N, D}, 8, 6);
  const Bf16Tensor y = src.tensor({N, D}, 8, 6);

  const Bf16Tensor ada = ops::ada_value(table, 0, value, 0);
  for (std::int64_t i = 0; i < N * D; ++i)
    ASSERT_EQ(em::ada_value(bits(table.data[i % D]), bits(value.data[i])), bits(ada.data[i])) << i;

  for (const std::int64_t mrows : {std::int64_t(1), N}) {
    SCOPED_TRACE("modulation rows " + std::to_string(mrows));
    // Scales near 0 make 1 + scale round; shifts of all sizes.
    const Bf16Tensor scale = src.tensor({mrows, D}, 12, 1), shift = src.tensor({mrows, D}, 8, 4);
    const Bf16Tensor mod = ops::modulate(x, scale, shift);
    const Bf16Tensor gr = ops::gated_residual(x, y, scale);
    for (std::int64_t r = 0; r < N; ++r)
      for (std::int64_t c = 0; c < D; ++c) {
        const std::int64_t i = r * D + c, m = (mrows == 1 ? 0 : r) * D + c;
        ASSERT_EQ(em::modulate(bits(x.data[i]), bits(scale.data[m]), bits(shift.data[m])), bits(mod.data[i])) << i;
        ASSERT_EQ(em::gated_residual(bits(x.data[i]), bits(y.data[i]), bits(scale.data[m])), bits(gr.data[i])) << i;
      }
    const Bf16Tensor op = ops::one_plus(scale);
    for (std::size_t i = 0; i < op.data.size(); ++i) ASSERT_EQ(em::one_plus(bits(scale.data[i])), bits(op.data[i]));
  }

  const Bf16Tensor res = ops::residual(x, y);
  for (std::int64_t i = 0; i < N * D; ++i) ASSERT_EQ(em::residual(bits(x.data[i]), bits(y.data[i])), bits(res.data[i]));
}

TEST(CudaElementMath, FinishLinearIsBitwiseForEveryBiasRule) {
  Source src(0x5eed'a0a2);
  const std::int64_t n = 513;
  std::vector<float> acc(n);
  for (auto& a : acc) a = src.f32(-40.0f, 40.0f);
  const Bf16Tensor bias = src.tensor({n}, 4, 6);
  std::vector<Bf16> fused(n), after(n), none(n);
  psi::finish_linear(acc.data(), bias.ptr(), psi::BiasRule::fused_f32, fused.data(), n);
  psi::finish_linear(acc.data(), bias.ptr(), psi::BiasRule::after_bf16, after.data(), n);
  psi::finish_linear(acc.data(), nullptr, psi::BiasRule::fused_f32, none.data(), n);
  std::int64_t rules_differ = 0;
  for (std::int64_t j = 0; j < n; ++j) {
    ASSERT_EQ(em::finish_fused(acc[j], bits(bias.data[j])), bits(fused[j])) << j;
    // The device's after_bf16 path: the product written BF16 first, then the bias kernel.
    ASSERT_EQ(em::bias_after_bf16(em::finish_plain(acc[j]), bits(bias.data[j])), bits(after[j])) << j;
    ASSERT_EQ(em::finish_plain(acc[j]), bits(none[j])) << j;
    rules_differ += fused[j] != after[j];
  }
  EXPECT_GT(rules_differ, 0) << "the data must tell the two bias rules apart";
}

TEST(CudaElementMath, SplitRopeIsBitwise) {
  Source src(0x5eed'a0a3);
  const std::int64_t T = 19, H = 3, half = 24, W = H * 2 * half;
  Bf16Tensor x = src.tensor({T, W}, 8, 4);
  ops::RopeTables t{Bf16Tensor({1, H, T, half}), Bf16Tensor({1, H, T, half})};
  for (std::size_t i = 0; i < t.cos.data.size(); ++i) {
    const float angle = src.f32(-7.0f, 7.0f);
    t.cos.data[i] = bf16_rne(std::cos(angle));
    t.sin.data[i] = bf16_rne(std::sin(angle));
  }
  const Bf16Tensor before = x;
  ops::apply_split_rope(psi::as_matrix(x), t);
  for (std::int64_t tok = 0; tok < T; ++tok)
    for (std::int64_t h = 0; h < H; ++h)
      for (std::int64_t j = 0; j < half; ++j) {
        const std::int64_t i1 = tok * W + h * 2 * half + j, i2 = i1 + half, ti = (h * T + tok) * half + j;
        const em::RopePair p = em::rope_pair(bits(before.data[i1]), bits(before.data[i2]), bits(t.cos.data[ti]),
                                             bits(t.sin.data[ti]));
        ASSERT_EQ(p.y1, bits(x.data[i1])) << tok << " " << h << " " << j;
        ASSERT_EQ(p.y2, bits(x.data[i2])) << tok << " " << h << " " << j;
      }
}

// The activations with the host's exp / tanh: every BF16 input, so the formulas (operation order,
// constants, rounding points) are pinned exhaustively.
TEST(CudaElementMath, ActivationFormulasMatchOpsOnEveryBf16Input) {
  std::vector<Bf16> in(0x10000), gelu(0x10000), sig(0x10000);
  for (std::uint32_t b = 0; b < 0x10000; ++b) in[b] = Bf16::from_bits(u16(b));
  ops::gelu_tanh(in.data(), gelu.data(), 0x10000);
  ops::sigmoid(in.data(), sig.data(), 0x10000);
  for (std::uint32_t b = 0; b < 0x10000; ++b) {
    ASSERT_EQ(em::gelu_tanh(u16(b)), bits(gelu[b])) << "bf16 bits " << b;
    ASSERT_EQ(em::sigmoid(u16(b)), bits(sig[b])) << "bf16 bits " << b;
  }
}

// The attention gate against the CPU OpKernels itself (it has no engine/ops function of its own),
// run on a host buffer standing in for the arena.
TEST(CudaElementMath, AttentionGateIsBitwiseGivenTheSigmoid) {
  Source src(0x5eed'a0a4);
  const std::int64_t R = 9, H = 4, Dh = 16;
  const Bf16Tensor z = src.tensor({R, H}, 4, 3), a = src.tensor({R, H * Dh}, 8, 4);
  std::vector<std::byte> arena(4096);
  std::memcpy(arena.data(), z.ptr(), z.bytes());
  std::memcpy(arena.data() + 1024, a.ptr(), a.bytes());
  const rt::KernelContext k{arena.data(), nullptr, &rt::cpu_op_kernels()};
  const rt::MatRef Z = rt::MatRef::dense({0, 1024, "z"}, R, H), A = rt::MatRef::dense({1024, 3072, "a"}, R, H * Dh);
  rt::cpu_op_kernels().attention_gate(k, Z, A, H, Dh);
  const auto* zo = reinterpret_cast<const u16*>(arena.data());
  const auto* ao = reinterpret_cast<const u16*>(arena.data() + 1024);
  for (std::int64_t r = 0; r < R; ++r)
    for (std::int64_t h = 0; h < H; ++h) {
      const u16 zs = em::sigmoid(bits(z.data[r * H + h]));
      ASSERT_EQ(zs, zo[r * H + h]);
      // The device test gives the multiply the device's own sigmoid value, as here.
      const float g = em::gate_factor(zo[r * H + h]);
      for (std::int64_t c = 0; c < Dh; ++c) {
        const std::int64_t i = r * H * Dh + h * Dh + c;
        ASSERT_EQ(em::gate_apply(bits(a.data[i]), g), ao[i]) << r << " " << h << " " << c;
      }
    }
}

// ---- reductions -----------------------------------------------------------------------------------

// rms_norm's statistic as the kernel forms it: each (chunk, lane) summed on its own, then the
// chunks' lane trees added in chunk order. Equal to reduce.h's ordered_sum, and the whole row
// to ops::rms_norm, for rows of one chunk, several, and a partial last one.
TEST(CudaElementMath, RmsNormOrderedRowSumAndRowsAreBitwise) {
  Source src(0x5eed'a0a5);
  for (const std::int64_t n : {1, 7, 8, 100, 1024, 1025, 2056, 3000, 4096, 5000}) {
    SCOPED_TRACE("row width " + std::to_string(n));
    const std::int64_t rows = 3;
    const Bf16Tensor x = src.tensor({rows, n}, 10, 8), w = src.tensor({n}, 2, 2);
    const Bf16Tensor y_plain = ops::rms_norm(x, nullptr, ops::kNormEps), y_w = ops::rms_norm(x, &w, ops::kNormEps);
    for (std::int64_t r = 0; r < rows; ++r) {
      const u16* row = reinterpret_cast<const u16*>(x.ptr() + r * n);
      float total = 0.0f;
      for (std::int64_t c0 = 0; c0 < n; c0 += em::kChunk) {
        float lanes[em::kLanes];
        for (int l = 0; l < em::kLanes; ++l) lanes[l] = em::lane_sum_squares(row, c0, std::min(c0 + em::kChunk, n), l);
        total = em::add(total, em::lane_tree(lanes));
      }
      const float expected = ops::ordered_sum(n, [&](std::int64_t c) {
        const float v = x.data[r * n + c].to_float();
        return v * v;
      });
      ASSERT_EQ(std::bit_cast<std::uint32_t>(total), std::bit_cast<std::uint32_t>(expected));
      const float rstd = em::rms_rstd(total, n, ops::kNormEps);
      for (std::int64_t c = 0; c < n; ++c) {
        ASSERT_EQ(em::rms_scale(row[c], rstd), bits(y_plain.data[r * n + c])) << c;
        ASSERT_EQ(em::rms_scale_weighted(row[c], bits(w.data[c]), rstd), bits(y_w.data[r * n + c])) << c;
      }
    }
  }
}

TEST(CudaElementMath, ScoreAndSoftmaxLaneSumsFollowReduceOrder) {
  Source src(0x5eed'a0a6);
  for (const std::int64_t d : {8, 64, 128, 1024}) {
    SCOPED_TRACE("head width " + std::to_string(d));
    const float factor = official::sdpa_qk_factor(d);
    ASSERT_EQ(std::bit_cast<std::uint32_t>(em::qk_factor(d)), std::bit_cast<std::uint32_t>(factor));
    const Bf16Tensor q = src.tensor({d}, 4, 3), k = src.tensor({d}, 4, 3);
    std::vector<float> qs(d), ks(d);
    for (std::int64_t c = 0; c < d; ++c) {
      qs[c] = q.data[c].to_float() * factor;
      ks[c] = k.data[c].to_float() * factor;
    }
    const float s = em::score(qs.data(), reinterpret_cast<const u16*>(k.ptr()), factor, d);
    const float e = ops::ordered_sum(d, [&](std::int64_t c) { return qs[c] * ks[c]; });
    ASSERT_EQ(std::bit_cast<std::uint32_t>(s), std::bit_cast<std::uint32_t>(e));
  }
  for (const std::int64_t n : {1, 9, 1024}) {
    std::vector<float> p(n);
    for (auto& v : p) v = src.f32(0.0f, 1.0f);
    float lanes[em::kLanes];
    for (int l = 0; l < em::kLanes; ++l) lanes[l] = em::lane_sum(p.data(), n, l);
    const float got = em::add(0.0f, em::lane_tree(lanes));
    const float e = ops::ordered_sum(n, [&](std::int64_t j) { return p[j]; });
    ASSERT_EQ(std::bit_cast<std::uint32_t>(got), std::bit_cast<std::uint32_t>(e)) << n;
  }
}

TEST(CudaElementMath, FoldMaxIsStdMaxIncludingSignedZerosAndNan) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const float vals[] = {-0.0f, 0.0f, 1.0f, -1.0f, nan, inf, -inf, 3.5f};
  for (float a : vals)
    for (float b : vals)
      ASSERT_EQ(std::bit_cast<std::uint32_t>(em::fold_max(a, b)), std::bit_cast<std::uint32_t>(std::max(a, b)))
          << a << " " << b;
}

// The attention kernels' schedule, replayed on the host with the same em:: pieces: scores of up
// to 1,024 keys at a time, the maximum folded in key order, p = exp(s − m) with reduce.h lane
// sums per 1,024-key chunk, each channel adding its keys in key order. It must give
// ops::sdpa_online_update's state bit for bit (here exp is the host's, as in ops), which shows
// that the kernels' decomposition does not reorder anything; the device test then compares the
// kernels themselves, where only expf can differ.
TEST(CudaElementMath, OnlineSoftmaxScheduleReproducesOpsState) {
  Source src(0x5eed'a0a7);
  const std::int64_t Nq = 3, Nk = 1300, H = 2, d = 16, W = H * d;
  const Bf16Tensor q = src.tensor({Nq, W}, 3, 2), k = src.tensor({Nk, W}, 3, 2), v = src.tensor({Nk, W}, 6, 3);
  for (const std::int64_t key_tile : {std::int64_t(128), std::int64_t(1100), std::int64_t(2048)}) {
    for (const bool p_bf16 : {true, false}) {
      SCOPED_TRACE("key tile " + std::to_string(key_tile) + (p_bf16 ? " p_bf16" : " p_f32"));
      ops::SdpaOptions opt;
      opt.form = ops::SoftmaxForm::online;
      opt.key_tile = key_tile;
      opt.p_bf16 = p_bf16;
      std::vector<float> m(Nq * H), l(Nq * H), o(Nq * W);
      const ops::OnlineState st{{m.data(), Nq, H, H}, {l.data(), Nq, H, H}, {o.data(), Nq, W, W}};
      ops::sdpa_online_begin(st);
      ops::sdpa_online_update(psi::as_matrix(q), psi::as_matrix(k), psi::as_matrix(v), H, opt, st);

      const float factor = official::sdpa_qk_factor(d);
      for (std::int64_t i = 0; i < Nq; ++i)
        for (std::int64_t h = 0; h < H; ++h) {
          std::vector<float> qs(d), os(d, 0.0f), p(em::kChunk);
          for (std::int64_t c = 0; c < d; ++c) qs[c] = em::mul(q.data[i * W + h * d + c].to_float(), factor);
          float mm = -std::numeric_limits<float>::infinity(), ll = 0.0f;
          auto score_of = [&](std::int64_t j) {
            return em::score(qs.data(), reinterpret_cast<const u16*>(k.ptr() + j * W + h * d), factor, d);
          };
          for (std::int64_t j0 = 0; j0 < Nk; j0 += key_tile) {
            const std::int64_t nt = std::min(key_tile, Nk - j0);
            float tile_max = -std::numeric_limits<float>::infinity();
            for (std::int64_t j = 0; j < nt; ++j) tile_max = em::fold_max(tile_max, score_of(j0 + j));
            const float m_new = em::fold_max(mm, tile_max), alpha = em::exp_f32(em::sub(mm, m_new));
            if (alpha != 1.0f)
              for (auto& oc : os) oc = em::mul(oc, alpha);
            float tile_sum = 0.0f;
            for (std::int64_t c0 = 0; c0 < nt; c0 += em::kChunk) {
              const std::int64_t cn = std::min(em::kChunk, nt - c0);
              for (std::int64_t j = 0; j < cn; ++j) p[j] = em::exp_f32(em::sub(score_of(j0 + c0 + j), m_new));
              float lanes[em::kLanes];
              for (int lane = 0; lane < em::kLanes; ++lane) lanes[lane] = em::lane_sum(p.data(), cn, lane);
              tile_sum = em::add(tile_sum, em::lane_tree(lanes));
              for (std::int64_t c = 0; c < d; ++c)
                for (std::int64_t j = 0; j < cn; ++j) {
                  const float pj = p_bf16 ? em::bf(p[j]) : p[j];
                  os[c] = em::add(os[c], em::mul(pj, v.data[(j0 + c0 + j) * W + h * d + c].to_float()));
                }
            }
            ll = em::add(em::mul(ll, alpha), tile_sum);
            mm = m_new;
          }
          ASSERT_EQ(std::bit_cast<std::uint32_t>(mm), std::bit_cast<std::uint32_t>(m[i * H + h]));
          ASSERT_EQ(std::bit_cast<std::uint32_t>(ll), std::bit_cast<std::uint32_t>(l[i * H + h]));
          for (std::int64_t c = 0; c < d; ++c)
            ASSERT_EQ(std::bit_cast<std::uint32_t>(os[c]), std::bit_cast<std::uint32_t>(o[i * W + h * d + c]))
                << i << " " << h << " " << c;
        }
    }
  }
}

// The MATH kernel's schedule (scores and maximum, then the softmax sum in 1,024-key chunks, then
// P·V per channel in reduce.h's chunked lanes) replayed on the host: ops::sdpa (MATH) bit for bit,
// over more than one chunk of keys.
TEST(CudaElementMath, MathSoftmaxScheduleReproducesOpsSdpa) {
  Source src(0x5eed'a0a8);
  const std::int64_t Nq = 3, Nk = 2100, H = 2, d = 24, W = H * d;
  const Bf16Tensor q = src.tensor({Nq, W}, 3, 2), k = src.tensor({Nk, W}, 3, 2), v = src.tensor({Nk, W}, 6, 3);
  Bf16Tensor out({Nq, W});
  ops::sdpa(psi::as_matrix(q), psi::as_matrix(k), psi::as_matrix(v), H, ops::SdpaOptions{}, psi::as_matrix(out));
  const test::MathReplay r = test::math_replay(q, k, v, H, official::sdpa_qk_factor(d));
  for (std::int64_t i = 0; i < Nq * W; ++i) ASSERT_EQ(em::round_bf16(r.o[i]), bits(out.data[i])) << i;
}

}  // namespace
}  // namespace psi
