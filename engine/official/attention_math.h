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
//   3. Softmax per row, by the kernel SoftMax.cu host_softmax picks for the row length n:
//      n ≤ 2,048: PersistentSoftmax.cuh softmax_warp_forward. W = min(next power of two ≥ n,
//        32) lanes, lane l holds keys l, l+W, l+2W, … (−∞ past the row's end); the row max;
//        e = expf(x − max) (libdevice, nv_expf.h); each lane sums its own e in key order from
//        +0; the lanes are combined by the xor butterfly, offsets W/2, …, 2, 1, every lane
//        adding its partner's value (float addition commutes, so every lane ends with the same
//        sum); P = e / sum, an IEEE division.
//      2,048 < n ≤ 9,216: SoftMax.cu cunn_SoftMaxForwardReg, one block of 1,024 threads per
//        row; thread t holds keys t, t+1024, … (at most 9); the row max; each thread sums
//        expf(x − max) over its keys in that order from +0; cuda_utils::BlockReduce adds the
//        1,024 sums: in each warp lane 0 gathers by shfl_down at offsets 16, 8, 4, 2, 1, then
//        warp 0 reduces the 32 warp sums the same way; P = expf(x − max) / sum, IEEE division.
//      A row of −∞ gives zeros (_safe_softmax). Longer rows (other kernels) are refused.
//   4. O = P·V: every output one FMA chain over the keys in ascending order, from +0; then
//      BF16 round-to-nearest-even.
//
// The GEMMs are established for the recorded shapes (the blocks' attentions); other shapes may
// get other SGEMM kernels on the GPU: a kernel configuration (kernel_config.h) can
// split either product's K, each slice a chain from +0 and the partial sums added in order.
#include <cstdint>

#include "engine/matrix.h"
#include "engine/official/kernel_config.h"
#include "engine/official/nv_expf.h"

namespace psi::official {

// f32(√(1/√d)), the factor the official MATH path applies to q and to k (psi's own attention
// scales the same way).
float sdpa_qk_factor(std::int64_t head_dim);

// The longest row the warp softmax takes: dim_size ≤ 2048 and 4·dim_size ≤ 8192 bytes (raised
// from 1,024 by PyTorch PR #144679, January 2025, well before 2.11).
inline constexpr std::int64_t kWarpSoftmaxMaxKeys = 2048;
// The block cunn_SoftMaxForwardReg runs on (SoftMaxForward_getBlockSize: min(n, 1024) rounded up
// to whole warps, so 1,024 for every row past the warp softmax) and the longest row it takes
// (potential_register_count = ⌈n / 1024⌉ < 10).
inline constexpr int kSoftmaxBlockThreads = 1024;
inline constexpr std::int64_t kRegSoftmaxMaxKeys = 9 * kSoftmaxBlockThreads;

// q [Nq, H·d], k and v [Nk, H·d], out [Nq, H·d]; mask: additive float32 [Nq, Nk] shared by
// all heads, rows mask_ld apart, or null. Shapes as ops::sdpa checks them. The products' K
// splits are `kernels`' choices (null: the recorded ones).
void sdpa_math_h200(CBf16Mat q, CBf16Mat k, CBf16Mat v, std::int64_t heads, const float* mask,
                    std::int64_t mask_ld, ExpModel exp, Bf16Mat out, const KernelConfig* kernels);

// The FP32 FMA chains of the MATH core's two products: C[r][j] = fma(A[r][c], B[c][j], C[r][j])
// for c0 ≤ c < c1 ascending, r < rows, j < n, each element one chain from its value in C
// (A rows lda apart, B rows ldb apart, C rows ldc apart). Stepped in register tiles 64 columns
// wide (`wide`: where AVX-512 holds them) or 16; the bits are the same either way.
void fma_chains(const float* a, std::int64_t lda, const float* b, std::int64_t ldb, std::int64_t c0, std::int64_t c1,
                float* C, std::int64_t ldc, std::int64_t rows, std::int64_t n, bool wide);

// The softmax of one score row s[0, n) in place: the warp softmax for n ≤ 2,048, the register
// block softmax for n ≤ 9,216; longer rows throw (their kernels are not modelled).
void h200_softmax_row(float* s, std::int64_t n, ExpModel exp);

// The softmax sum of one row's n exponentials as the kernel for n sums them: the warp
// softmax's lanes and butterfly (n ≤ 2,048), the register block softmax's 1,024 threads and
// BlockReduce (n ≤ 9,216); longer rows throw.
float h200_softmax_sum(const float* e, std::int64_t n);

// cuda_utils::BlockReduce's sum of one value per thread, `threads` a multiple of 32 up to
// 1,024: each warp's lane 0 by shfl_down at offsets 16, …, 1 (lane l adds lane l + offset),
// then the same over the warp sums, padded with +0 to 32; thread 0's result.
float block_reduce_sum(const float* per_thread, int threads);

// The xor-butterfly sum of `width` lane values (a power of two ≤ 32), as the warp computes it
// (every lane updated at once with its partner at offsets width/2, …, 1); lane 0's result.
float warp_butterfly_sum(const float* lanes, int width);

}  // namespace psi::official
