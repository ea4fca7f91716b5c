#pragma once
// cosf and sinf as CUDA device code computes them: libdevice's __nv_cosf / __nv_sinf (the
// non-FTZ build PyTorch compiles with; torch.cos / torch.sin on a float32 CUDA tensor), read
// from the disassembled bitcode of CUDA's nvvm/libdevice/libdevice.10.bc (llvm-dis). The
// implementation is psi's; only the algorithm and its constants are libdevice's.
//
// Every step is an IEEE float32 operation (fma = one rounding) unless named otherwise:
//   j  = cvt.rni(x · 2/π)                        nearest integer, ties to even; 2/π = 0x3f22f983
//   r  = fma(j, −C3, fma(j, −C2, fma(j, −C1, x)))  Cody–Waite: π/2 = C1 + C2 + C3,
//                                                 C1 = 0x3fc90fda, C2 = 0x33a22168, C3 = 0x27c234c5
//   for |x| ≥ 105615 instead (Payne–Hanek): x's significand times 192 bits of 2/π (libdevice's
//   __cudart_i2opi_f) in 32-bit limbs, the quadrant q from the top two bits of the product's
//   fraction window and r = f32(f64(fraction as int64) · π/2·2^−64) (±∞ gives r = NaN);
//   the quadrant q = j, plus 1 for cos; s = r·r;
//   q odd (cos-like): p = fma(fma(fma(2.42795795e−5, s, −1.38878601e−3), s, 4.16667275e−2),
//                                s, −0.49999997), y = fma(p, fma(s, 1, 0), 1)
//   q even (sin-like): p = fma(fma(−1.95746587e−4, s, 8.33270326e−3), s, −0.166666627),
//                                y = fma(p, fma(s, r, 0), r)
//   y = fma(y, −1, 0) when q & 2.
#include <cstdint>

namespace psi::official {

// How psi evaluates the float32 scalar arithmetic of the model-level operators that the official
// code runs as PyTorch ops on CUDA tensors: the token positions, the RoPE tables and the timestep
// sinusoid.
enum class F32Math {
  host,  // the C library's cosf/sinf/expf and IEEE division (psi's recipe before official-h200)
  cuda,  // as PyTorch on CUDA: libdevice's cosf/sinf (here) and expf (nv_expf.h), and a
         // tensor-by-scalar division as a product with the divisor's float32 reciprocal
};

// The argument reduction shared by both: x ≈ r + q·π/2 (q modulo 4 is what matters).
struct TrigReduction {
  float r;
  std::int32_t q;
};
TrigReduction nv_trig_reduce(float x);

float nv_cosf(float x);
float nv_sinf(float x);

// cos / sin of a float32 under the chosen arithmetic.
float cos_f32(float x, F32Math math);
float sin_f32(float x, F32Math math);

}  // namespace psi::official
