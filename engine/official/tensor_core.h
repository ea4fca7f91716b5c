#pragma once
// The H200 tensor core's BF16 x BF16 -> FP32 inner product, as the cuBLASLt kernel behind the
// recorded official projections computed it (../shared/spec/h200-tensor-core-gemm.md; the
// block-FMA model of Khattak and Mikaitis, "Accurate Models of NVIDIA Tensor Cores", arXiv
// 2512.07004, H100/H200 parameters). Every result is exact by construction: the terms are
// integers (products of significands, or FP32 products where those are exact), summed as
// integers; no floating-point sum anywhere.
//
// A BF16 value is +-M * 2^(e-7): M = 128|mantissa and e = field-127 for normals; M = mantissa
// and e = -126 for subnormals and zeros. The FP32 accumulator is +-A * 2^(a-23) likewise
// (A 24 bits; a = -126 for subnormals). One output is a chain of block FMAs over K ascending,
// 16 products a block, the accumulator starting at +0 (or at the caller's float32 value):
//
//   E = max(e_x+e_w over the block's non-zero products, a if acc != 0), at least -133
//   T = sum_i sign_i * trunc(M_x M_w 2^11 / 2^(E - e_x - e_w)) + sign(acc) * trunc(A 2^2 / 2^(E - a))
//       (each magnitude truncated on its own: 2 bits below the FP32 fraction, no sticky bit)
//   acc = T * 2^(E-25) truncated toward zero to FP32 (24-bit significand, or the subnormal
//         grid 2^-149); T = 0 gives +0; a leading bit at 2^128 or above gives +-Inf
//
// Zero products take no part in E; a block with no non-zero product and a zero accumulator
// leaves +0. A K that is not a multiple of 16 ends in a shorter block (the model's zero
// padding changes nothing). Non-finite operands follow the published model's rule for the
// whole output: the products x_k w_k (Inf * 0 is NaN) and the entering accumulator decide:
// any NaN -> NaN; +Inf and -Inf both -> NaN; otherwise the Inf's sign. An accumulator that
// overflowed to +-Inf stays there (the model is silent; IEEE addition keeps it).
//
// The Linear epilogue (cuBLASLt's bias epilogue): y = bf16_rne(fp32_rne(acc + b)), the bias
// added in FP32 with one rounding, then round-to-nearest-even to BF16 (BiasRule::fused_f32);
// BiasRule::after_bf16 writes bf16(acc) first, as for the other products.
//
// Chaining makes a K split at a multiple of 16 exact: gemm_accumulate over consecutive K
// slices, each continuing from the float32 values the previous one left, is bitwise the whole
// product (the PSI FFN's 1,024-channel hidden tiles rely on it).
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engine/bf16.h"
#include "engine/bf16_scan.h"
#include "engine/epilogue.h"
#include "engine/matrix.h"
#include "engine/official/kernel_config.h"
#include "engine/tensor.h"

namespace psi::official::tc {

inline constexpr int kBlock = 16;          // products per block FMA
inline constexpr int kMinAlignExp = -133;  // the model's min_exp_limit for the alignment exponent

// One block FMA of a traced chain.
struct BlockStep {
  std::int64_t k0 = 0;        // first k of the block
  int products = 0;           // non-zero products in it
  float acc_in = 0.0f;        // accumulator entering the block
  int align_exp = 0;          // E
  std::int64_t sum = 0;       // T, in units of 2^(E-25)
  int truncated_terms = 0;    // terms (products or the accumulator) that lost bits in alignment
  int normalize_dropped = 0;  // low bits of |T| dropped by the truncation to FP32
  float acc_out = 0.0f;       // accumulator leaving the block
};

// The chain for one output: sum_k x_k w_k continued from `acc`. The definition every other
// form here is tested against; `trace` (optional) receives one step per block.
float dot(std::span<const Bf16> x, std::span<const Bf16> w, float acc = 0.0f,
          std::vector<BlockStep>* trace = nullptr);

// C[m][n] = the chain of A's row m and W's row n continued from C[m][n]. A is [M, K], W is
// [N, K]. Vectorised and threaded; bitwise dot() per element, whatever the thread count.
void gemm_accumulate(CBf16Mat A, CBf16Mat W, F32Mat C);

// An operand's scan (bf16_scan.h) made once for many products: scan_bf16 of the operand or of a
// matrix holding it (whose wider bounds only ever choose a slower kernel, never other bits; a row
// it calls non-finite is computed by dot()), the operand's row i being the scan's row row0 + i.
struct OperandScan {
  const Bf16Scan& scan;
  std::int64_t row0 = 0;
};
// gemm_accumulate with the scans given: the FLASH core multiplies the same query rows and
// key/value heads tile after tile. psi::Error where a scan has too few rows.
void gemm_accumulate(CBf16Mat A, OperandScan a, CBf16Mat W, OperandScan w, F32Mat C);

// y = x Wᵀ + b with the epilogue above. The K split is `kernels`' choice for the shape
// (kernel_config.h; null: the recorded choices): each K slice a chain of its own from +0, the partial
// sums added in FP32 in slice order before the epilogue. By default a one-row product over
// K = 4,096 is split in two, as cuBLASLt's heuristic chose on the full block's video text
// cross-attention, whose one-token context makes to_k and to_v 1 x 4,096 x 4,096 products: with
// the split, attn2's recorded rows are bitwise; without it 21,888 of their 1,048,576 elements
// differ. One-row products over K = 512 (block-small's contexts) and 2,048 (the full block's
// audio context) are single chains on the recordings (../shared/spec/h200-tensor-core-gemm.md,
// "Which kernels this covers"). bias may be null (then y = bf16(acc)). Tensors go through
// ops::linear with Product::h200_tensor_core.
void linear(CBf16Mat x, CBf16Mat W, const Bf16* bias, BiasRule rule, Bf16Mat y, const KernelConfig* kernels);

// The lane kernel the matrix form runs: the best the machine has (default); or one named, for
// the tests that check that every kernel gives the same bits. `avx512` also finishes each
// block in the vector lanes (the FP32 truncation by a round-toward-zero conversion), falling
// back to the scalar finish for the rare blocks that leave the normal range or overflow 32
// bits; `avx512_fp` is `avx512` with each product formed in FP32 and aligned by a multiply and
// a truncating conversion, for products whose every x·w is a normal FP32 value (no subnormal
// operand, exponent sums in [−100, 125]: all real activations and weights), `avx512` for the
// others (and for a W whose row stride is over 2^31 / 16 elements, past its gather's indices);
// `avx2` is `avx512`'s integer kernel in 8-lane halves, its block finish in the lanes too (a
// truncation to 24 bits before an exact conversion); `avx2_double` (the default without AVX-512)
// takes each product as one double FMA rounding toward −∞ (tensor_core_double.cpp), for any
// finite operands; `portable` is the reference loop.
enum class LaneKernel { best, portable, avx2, avx512, avx512_fp, avx2_double };
bool lane_kernel_available(LaneKernel k);
// psi::Error for a kernel this machine cannot run.
void set_lane_kernel(LaneKernel k);
// The kernel gemm_accumulate runs for these operands under the kernel set (never `best`).
LaneKernel lane_kernel_for(CBf16Mat A, CBf16Mat W);
// The lane kernels the set kernel comes to at the vector level in force, for psi --version:
// e.g. "avx512_fp (FP32 products), avx512 (integer products) where those are not all exact".
std::string lane_kernels_in_force();

}  // namespace psi::official::tc
