#pragma once
// GEMM and Linear on the CPU: y = x · Wᵀ (+ b), W stored [out, in] as in PyTorch.
//
// Reduction order (reduce.h): every output y[m][n] is the float32 sum over k of
// f32(x[m][k]) · f32(W[n][k]) — each product rounded to float32 once, then added; a BF16
// product is exact unless it leaves FP32's range, and where every product of A and W is exact
// (bf16_scan.h) the AVX-512 kernel adds each with one FMA, the same bits — taken in 1,024-wide K
// chunks from k = 0, eight strided lanes per chunk,
// the fixed lane tree, and chunk results added in order to the output's running float32
// value. The order depends only on K: not on the tile sizes, the vector width or the thread
// count. A product over K split at multiples of 1,024 (gemm_accumulate on each K slice, in
// order, into the same float32 accumulator) is therefore bitwise equal to the whole product.
#include <cstdint>

#include "engine/epilogue.h"
#include "engine/matrix.h"
#include "engine/official/kernel_config.h"
#include "engine/tensor.h"

namespace psi::ops {

// The arithmetic of a BF16 product's float32 accumulator.
enum class Arith {
  psi_f32,           // psi's own float32 order (above)
  h200_tensor_core,  // the H200 tensor core's block-FMA chain (tensor_core.h): the official bits
};

// Everything that decides a product's bits, in one value: the arithmetic and, for the H200's,
// which kernel ran for each product shape (its K split, official/kernel_config.h; null: the
// recorded choices). Which lane kernel and how many threads compute it do not change a bit
// (tensor_core.h): they are how fast, not what.
struct Product {
  Arith arith = Arith::psi_f32;
  official::KernelConfigRef kernels;

  static const Product psi_f32;
  static const Product h200_tensor_core;  // under the recorded kernel choices
};
inline const Product Product::psi_f32{Arith::psi_f32, nullptr};
inline const Product Product::h200_tensor_core{Arith::h200_tensor_core, nullptr};

// C[m][n] += Σ_k A[m][k]·W[n][k] in the order above (K chunks start at A/W column 0); with
// Product::h200_tensor_core the chain of tensor_core.h continued from C (split K at multiples
// of 16 for bitwise neutrality). A is [M, K], W is [N, K], C is [M, N]; element types are BF16
// or float32 (widened exactly; float32 operands have psi's order only).
void gemm_accumulate(CBf16Mat A, CBf16Mat W, F32Mat C, Product product = Product::psi_f32);
void gemm_accumulate(CF32Mat A, CF32Mat W, F32Mat C);

// y = x·Wᵀ + b with BF16 output. bias may be null (then both rules give bf(acc)).
void linear(CBf16Mat x, CBf16Mat W, const Bf16* bias, BiasRule rule, Bf16Mat y,
            Product product = Product::psi_f32);
// y = acc + b in float32 (no BF16 write); bias may be null.
void linear_f32(CBf16Mat x, CBf16Mat W, const Bf16* bias, F32Mat y);

// Tensor conveniences: x [..., K], W [N, K], b [N] or null -> [..., N].
Bf16Tensor linear(const Bf16Tensor& x, const Bf16Tensor& W, const Bf16Tensor* b,
                  BiasRule rule = BiasRule::fused_f32, Product product = Product::psi_f32);

}  // namespace psi::ops
