#pragma once
// The per-element arithmetic of the CUDA OpKernels, written once for the device and the host.
//
// Every function is __host__ __device__ under nvcc and a plain inline function under a C++
// compiler, so tests/test_cuda_element_math.cpp compiles this header with g++ and checks it bit
// for bit against engine/ops on the CPU (no GPU needed). The .cu kernels call exactly these
// functions, so what that test proves about the formulas holds for the device code.
//
// Why a header of its own and not engine/bf16.h: bf16.h rests on std::bit_cast and constexpr
// host code, which device code cannot call. BF16 values are therefore handled here as their
// uint16_t storage bits, with the round-to-nearest-even conversion written out (the test proves
// it equal to psi::bf16_rne on every float class).
//
// Why explicit rounding intrinsics on the device: __fadd_rn, __fmul_rn, __fdiv_rn and
// __fsqrt_rn are IEEE single operations that nvcc never contracts into an FMA or replaces with
// an approximation, whatever -fmad / -prec-div / -use_fast_math say. The CPU build forbids
// contraction (-ffp-contract=off), so the same sequence of rounded operations happens on both
// sides. exp and tanh are the exception: the device uses CUDA's expf / tanhf, the host the C
// library's; they can differ in the last float32 bit (see docs/cuda-backend.md), so sigmoid,
// gelu and softmax are not claimed bitwise.
#include <cstdint>

#if defined(__CUDACC__)
#define PSI_HD __host__ __device__ __forceinline__
#else
#define PSI_HD inline
#endif

#include <cmath>

#include "engine/ops/reduce_order.h"
#if !defined(__CUDA_ARCH__)
#include <bit>
#endif

namespace psi::em {

// ---- float32 operations that are never contracted or approximated -------------------------

PSI_HD float add(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}

PSI_HD float sub(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}

PSI_HD float mul(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}

PSI_HD float div(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}

PSI_HD float sqrt_rn(float a) {
#if defined(__CUDA_ARCH__)
  return __fsqrt_rn(a);
#else
  return std::sqrt(a);
#endif
}

// The two transcendental functions: CUDA's on the device, the C library's on the host.
PSI_HD float exp_f32(float a) {
#if defined(__CUDA_ARCH__)
  return expf(a);
#else
  return std::exp(a);
#endif
}

PSI_HD float tanh_f32(float a) {
#if defined(__CUDA_ARCH__)
  return tanhf(a);
#else
  return std::tanh(a);
#endif
}

// ---- BF16 storage bits ------------------------------------------------------------------------

PSI_HD std::uint32_t bits_of(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  return std::bit_cast<std::uint32_t>(f);
#endif
}

PSI_HD float float_of(std::uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  return std::bit_cast<float>(u);
#endif
}

// A BF16 value is exactly the float32 whose top 16 bits it is.
PSI_HD float widen(std::uint16_t b) { return float_of(std::uint32_t(b) << 16); }

// float32 -> BF16 bits, round to nearest, ties to even; NaN stays NaN (quietened, sign kept),
// overflow goes to +-Inf, subnormals round like normals. psi::bf16_rne's rule.
PSI_HD std::uint16_t round_bf16(float f) {
  std::uint32_t u = bits_of(f);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu) != 0) return std::uint16_t((u >> 16) | 0x0040u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return std::uint16_t(u >> 16);
}

// The BF16 write boundary as a float32 value (psi::bf).
PSI_HD float bf(float f) { return widen(round_bf16(f)); }

// ---- elementwise operators (engine/ops formulas, same rounding points) ------------------------

// ops::ada_value: bf(table + value).
PSI_HD std::uint16_t ada_value(std::uint16_t table, std::uint16_t value) {
  return round_bf16(add(widen(table), widen(value)));
}

// ops::one_plus: bf(1 + v).
PSI_HD std::uint16_t one_plus(std::uint16_t v) { return round_bf16(add(1.0f, widen(v))); }

// ops::modulate with ops::one_plus(scale): bf( bf(x · bf(1 + scale)) + shift ).
PSI_HD std::uint16_t modulate(std::uint16_t x, std::uint16_t scale, std::uint16_t shift) {
  return round_bf16(add(bf(mul(widen(x), widen(one_plus(scale)))), widen(shift)));
}

// ops::gated_residual: bf( x + bf(y · g) ).
PSI_HD std::uint16_t gated_residual(std::uint16_t x, std::uint16_t y, std::uint16_t g) {
  return round_bf16(add(widen(x), bf(mul(widen(y), widen(g)))));
}

// ops::residual: bf(x + y).
PSI_HD std::uint16_t residual(std::uint16_t x, std::uint16_t y) { return round_bf16(add(widen(x), widen(y))); }

// psi::finish_linear, BiasRule::fused_f32: bf(acc + bias); bf(acc) without a bias.
PSI_HD std::uint16_t finish_fused(float acc, std::uint16_t bias) { return round_bf16(add(acc, widen(bias))); }
PSI_HD std::uint16_t finish_plain(float acc) { return round_bf16(acc); }

// BiasRule::after_bf16 on a product already written BF16 (y = bf(acc)): bf(y + bias).
PSI_HD std::uint16_t bias_after_bf16(std::uint16_t y, std::uint16_t bias) {
  return round_bf16(add(widen(y), widen(bias)));
}

// ops::apply_split_rope for one pair (x1 = a, x2 = b) with table entries c (cos), s (sin):
//   y1 = bf( bf(a·c) + (−s)·b ),  y2 = bf( bf(b·c) + s·a ).
struct RopePair {
  std::uint16_t y1, y2;
};
PSI_HD RopePair rope_pair(std::uint16_t a, std::uint16_t b, std::uint16_t c, std::uint16_t s) {
  const float fa = widen(a), fb = widen(b), fc = widen(c), fs = widen(s);
  const float t1 = bf(mul(fa, fc)), t2 = bf(mul(fb, fc));
  return {round_bf16(add(t1, mul(-fs, fb))), round_bf16(add(t2, mul(fs, fa)))};
}

// The attention gate: the per-head factor bf(2 · z) of a gate value z = bf(sigmoid(.)), and its
// product with one element of the head, bf(a · factor).
PSI_HD float gate_factor(std::uint16_t z) { return bf(mul(2.0f, widen(z))); }
PSI_HD std::uint16_t gate_apply(std::uint16_t a, float factor) { return round_bf16(mul(widen(a), factor)); }

// ---- activations (not bitwise across device and host: exp / tanh differ) ----------------------

// ops::sigmoid_f32: 1 / (1 + exp(−x)).
PSI_HD float sigmoid_f32(float x) { return div(1.0f, add(1.0f, exp_f32(-x))); }
PSI_HD std::uint16_t sigmoid(std::uint16_t x) { return round_bf16(sigmoid_f32(widen(x))); }

// ops::gelu_tanh_f32: (0.5·x) · (1 + tanh(β·(x + κ·((x·x)·x)))), β and κ rounded once from
// double as PyTorch's constants are.
inline constexpr float kGeluBeta = float(1.41421356237309504880 * 1.12837916709551257390 * 0.5);
inline constexpr float kGeluKappa = float(0.044715);
PSI_HD float gelu_tanh_f32(float x) {
  const float x_cube = mul(mul(x, x), x);
  const float inner = mul(kGeluBeta, add(x, mul(kGeluKappa, x_cube)));
  return mul(mul(0.5f, x), add(1.0f, tanh_f32(inner)));
}
PSI_HD std::uint16_t gelu_tanh(std::uint16_t x) { return round_bf16(gelu_tanh_f32(widen(x))); }

// ---- reductions in engine/ops/reduce.h's order ------------------------------------------------

using ops::kChunk;
using ops::kLanes;

// The add() above as a functor, for the shared lane tree.
struct RoundedAdd {
  PSI_HD float operator()(float a, float b) const { return add(a, b); }
};

// The fixed combination of the eight lane sums of one chunk (reduce_order.h).
PSI_HD float lane_tree(const float* l) { return ops::lane_tree(l, RoundedAdd{}); }

// One lane of one chunk of Σ x[k]² (rms_norm's statistic): the terms k = c0 + lane,
// c0 + lane + 8, ... below c1, in increasing k, from +0. Squares of BF16 are exact in float32.
PSI_HD float lane_sum_squares(const std::uint16_t* x, std::int64_t c0, std::int64_t c1, int lane) {
  float s = 0.0f;
  for (std::int64_t k = c0 + lane; k < c1; k += kLanes) {
    const float v = widen(x[k]);
    s = add(s, mul(v, v));
  }
  return s;
}

// One lane of one chunk of Σ p[k] (a softmax sum), the terms as above; p holds the chunk's values
// from index c0 on (p[0] is term c0).
PSI_HD float lane_sum(const float* p, std::int64_t n, int lane) {
  float s = 0.0f;
  for (std::int64_t k = lane; k < n; k += kLanes) s = add(s, p[k]);
  return s;
}

// rms_norm: rstd = 1 / sqrt(ss / n + eps), then y = bf(x · rstd) or bf((x · rstd) · w).
PSI_HD float rms_rstd(float sum_squares, std::int64_t n, float eps) {
  return div(1.0f, sqrt_rn(add(div(sum_squares, float(n)), eps)));
}
PSI_HD std::uint16_t rms_scale(std::uint16_t x, float rstd) { return round_bf16(mul(widen(x), rstd)); }
PSI_HD std::uint16_t rms_scale_weighted(std::uint16_t x, std::uint16_t w, float rstd) {
  return round_bf16(mul(mul(widen(x), rstd), widen(w)));
}

// An attention score in the order of engine/ops/attention.cpp (d ≤ 1024, a multiple of 8: one
// chunk): lane l sums q[c]·k[c] for c ≡ l (mod 8) in increasing c, from +0; the result is
// +0 + lane_tree. q is the scaled float32 query head; k the key head as BF16 bits, scaled here
// by `factor` exactly as ops scales it (one product per element, before the dot).
PSI_HD float score(const float* q, const std::uint16_t* k, float factor, std::int64_t d) {
  float lane[kLanes] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
  for (std::int64_t c = 0; c < d; ++c) lane[c % kLanes] = add(lane[c % kLanes], mul(q[c], mul(widen(k[c]), factor)));
  return add(0.0f, lane_tree(lane));
}

// official::sdpa_qk_factor: f32(√(1/√d)), the factor applied to q and to k (a host function: the
// kernels receive it as an argument; here so that the CUDA library needs nothing from psi_engine).
inline float qk_factor(std::int64_t head_dim) { return float(std::sqrt(1.0 / std::sqrt(double(head_dim)))); }

// The maximum as std::max folds it, max(a, b) = a < b ? b : a (a NaN b is never taken; of equal
// values, +0 and −0 included, the first stays).
PSI_HD float fold_max(float a, float b) { return a < b ? b : a; }

}  // namespace psi::em
