#pragma once
// The SDPA MATH attention core as PyTorch computed it on the H200 (torch 2.11,
// _scaled_dot_product_attention_math; ../shared/spec/h200-tensor-core-gemm.md, "The SDPA MATH
// attention core"): bitwise the recorded official probe_audio_self_attn/math/sdpa_out from its
// recorded q, k, v. Per head of width d:
//
//   1. q, k, v widened to float32; q' = fl32(q·s), k' = fl32(k·s), s = f32(√(1/√d)).
//   2. S = q'·k'ᵀ: every score one correctly rounded float32 FMA chain over the d channels in
//      ascending order, from +0 (the batched SGEMM; no TF32). An additive mask is added in
//      float32, one rounding.
//   3. Softmax per row (SoftMax.cu host_softmax → PersistentSoftmax.cuh softmax_warp_forward,
//      for rows of at most 1,024 keys): W = min(next power of two ≥ n, 32) lanes, lane l holds
//      keys l, l+W, l+2W, … (−∞ past the row's end); the row max; e = expf(x − max) (libdevice,
//      nv_expf.h); each lane sums its own e in key order from +0; the lanes are combined by the
//      xor butterfly, offsets W/2, …, 2, 1, every lane adding its partner's value (float
//      addition commutes, so every lane ends with the same sum); P = e / sum, an IEEE division.
//      A row of −∞ gives zeros (_safe_softmax).
//   4. O = P·V: every output one FMA chain over the keys in ascending order, from +0; then
//      BF16 round-to-nearest-even.
//
// Rows of more than 1,024 keys: PyTorch runs another kernel there (cunn_SoftMaxForward), whose
// reduction is not established; such rows take psi's MATH softmax (attention.h,
// math_softmax_row) in the same function, with steps 1, 2 and 4 as above. The GEMMs are
// established for the recorded shape only (32 heads × 126 queries × 126 keys × 64 channels);
// other shapes may get other SGEMM kernels on the GPU.
#include <cstdint>

#include "engine/ops/matrix.h"
#include "engine/ops/nv_expf.h"

namespace psi::ops {

// The longest row the warp softmax takes (dim_size ≤ 1024 and 4·dim_size ≤ 4096 bytes).
inline constexpr std::int64_t kWarpSoftmaxMaxKeys = 1024;

// q [Nq, H·d], k and v [Nk, H·d], out [Nq, H·d]; mask: additive float32 [Nq, Nk] shared by
// all heads, rows mask_ld apart, or null. Shapes as ops::sdpa checks them.
void sdpa_math_h200(CBf16Mat q, CBf16Mat k, CBf16Mat v, std::int64_t heads, const float* mask,
                    std::int64_t mask_ld, ExpModel exp, Bf16Mat out);

// The softmax of one score row s[0, n) in place: the warp softmax for n ≤ 1,024, psi's MATH
// softmax beyond.
void h200_softmax_row(float* s, std::int64_t n, ExpModel exp);

// The xor-butterfly sum of `width` lane values (a power of two ≤ 32), as the warp computes it
// (every lane updated at once with its partner at offsets width/2, …, 1); lane 0's result.
float warp_butterfly_sum(const float* lanes, int width);

}  // namespace psi::ops
