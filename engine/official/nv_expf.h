#pragma once
// expf as CUDA device code computes it: libdevice's __nv_expf (the non-FTZ build PyTorch
// compiles with), whose only approximate step is the SFU instruction ex2.approx.ftz.f32.
//
// __nv_expf(x), every step an IEEE float32 operation unless named otherwise:
//   t  = sat(fma.rn(x, log2(e)/252, 0.5))       sat clamps to [0, 1], NaN to 0
//   j  = fma.rm(t, 252, 12582913)               = 12582913 + ⌊252·t⌋, an integer below 2^24
//   k  = j − 12583039                           the exponent, −126 ≤ k ≤ 126
//   r  = fma.rn(x, L_lo, fma.rn(x, L_hi, −k))   x·log2(e) − k, log2(e) = L_hi + L_lo
//   2^k from j's bits shifted left by 23        (its low 9 bits become the exponent field)
//   y  = ex2.approx.ftz(r) · 2^k                an IEEE multiply: subnormal results are kept
// with L_hi = 0x3fb8aa3b, L_lo = 0x32a57060, log2(e)/252 = 0x3bbb989d (the constants of the
// PTX CUDA emits for expf).
//
// ex2.approx.ftz.f32 is a hardware table. The model here is the reverse-engineered one of the
// NVIDIA SFU in envytools (nvhw/sfu.c, sfu_preex2 and sfu_ex2; table nvhw/sfu_tab.c,
// sfu_ex2_tab; MIT licence, © 2015 Marcin Kościelnicki): the input converted to a
// sign-magnitude fixed-point number with 23 fraction bits, its fraction cut into a 6-bit table
// index and a 17-bit offset, and 2^fraction evaluated as A + B·offset + C·offset² from the
// table with fixed-point truncations; the integer part goes to the exponent. One change, the
// one the recorded H200 attention requires: the float → fixed-point conversion truncates
// (envytools rounds to nearest even). The model is established on recorded tensors only
// (../shared/spec/h200-tensor-core-gemm.md), not on direct hardware vectors.
#include <cstdint>

namespace psi::official {

enum class ExpModel {
  ex2_table,          // __nv_expf with the ex2.approx table model (the established model)
  correctly_rounded,  // the stand-in: e^x correctly rounded to float32
};

// ex2.approx.ftz.f32 as modelled: subnormal inputs count as 0 (2^0 = 1), results below 2^−126
// are flushed to +0; 2^−∞ = +0, 2^+∞ = +∞, NaN gives NaN, |x| ≥ 128 gives +∞ or +0.
float ex2_approx_ftz(float x);

// __nv_expf's argument reduction: the exponent k and the reduced argument r, so that
// expf(x) = ex2.approx.ftz(r) · 2^k; r lies in [0, 1) up to one rounding while
// −126 ≤ x·log2(e) < 127, and carries the rest where k saturates at ±126.
struct ExpfReduction {
  float r;
  int k;
};
ExpfReduction nv_expf_reduce(float x);

// expf(x) under the chosen model.
float nv_expf(float x, ExpModel model = ExpModel::ex2_table);

// y[j] = ex2_approx_ftz(x[j]) and y[j] = nv_expf(x[j]) (the ex2 table model) for j < n, x == y
// allowed: the same bits as the functions above, computed without branches so that the
// compiler steps them in SIMD lanes (the softmax rows of both attention cores spent most of
// their time in these two). NvExpfLanes (tests/test_official_attention.cpp) holds them to the
// scalar ones.
void ex2_approx_ftz_lanes(const float* x, float* y, std::int64_t n);
void nv_expf_lanes(const float* x, float* y, std::int64_t n);

}  // namespace psi::official
