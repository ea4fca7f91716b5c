#pragma once
// The epilogue of a BF16 Linear: how the float32 accumulator and the bias become the BF16
// output. One rule for every product that writes a Linear (psi's float32 GEMM, engine/ops/gemm.h,
// and the H200 tensor-core model, engine/official/tensor_core.h), so the two differ only in
// their accumulators.
#include <cstdint>

#include "engine/bf16.h"

namespace psi {

// Where the bias enters a BF16 Linear output (PyTorch's fused epilogue is fused_f32).
enum class BiasRule {
  fused_f32,   // bf(acc + b): one BF16 write (official cuBLAS epilogue)
  after_bf16,  // bf(bf(acc) + b): the product is written BF16, then the bias is added
};

// out[j] = the BF16 output of acc[j] (+ bias[j]) under `rule`, j < n; bias may be null (then
// both rules give bf(acc)). For products that accumulate themselves (tiled down-projections).
void finish_linear(const float* acc, const Bf16* bias, BiasRule rule, Bf16* out, std::int64_t n);

}  // namespace psi
