#pragma once
// The feed-forward network y = W2 · gelu_tanh(W1 · x + b1) + b2 (spec §3.3 steps 13–14) in its
// dense form and in the PSI partitioned form.
//
// Partitioned form: the hidden channels are cut into complete, disjoint tiles of `hidden_tile`
// channels (1,024 by default, min(1024, hidden) for small models). For hidden tile t:
//   H_t = bf(gelu(up_t)),  up_t = x · W1[t rows]ᵀ (+ b1[t]) written BF16 by `up_bias`
// (a page-sized weight slice: hidden_tile whole rows of W1). The down-projection of output
// column tile o (out_tile channels) is the float32 sum over t, in tile order, of the partial
// products H_t · W2[o rows, t columns]ᵀ, and the bias is added once at the end: bf(acc + b2).
// Because the GEMM sums K in 1,024-wide chunks in order (gemm.h) and hidden tiles are
// multiples of 1,024 (or the whole hidden width), this is bitwise equal to the dense form; the
// tensor-core product chains its accumulator across them (multiples of 16), so it is too.
//
// Two schedules of the same arithmetic:
//   recompute: for each output tile, recompute every hidden tile (nothing hidden is kept);
//   reuse:     compute each hidden tile once, keep it (BF16), apply it to every output tile.
#include <cstdint>

#include "engine/ops/gemm.h"
#include "engine/ops/reduce_order.h"
#include "engine/tensor.h"

namespace psi::ops {

struct FfnWeights {
  const Bf16Tensor* up_w = nullptr;    // [hidden, D]
  const Bf16Tensor* up_b = nullptr;    // [hidden] or null
  const Bf16Tensor* down_w = nullptr;  // [D_out, hidden]
  const Bf16Tensor* down_b = nullptr;  // [D_out] or null
};

enum class FfnSchedule { dense, recompute, reuse };

// The default hidden tile: one reduction chunk (reduce_order.h), so that tiling the hidden
// channels cuts the down-projection's sums exactly where the dense sum's chunks end.
inline constexpr std::int64_t kHiddenTile = kChunk;

struct FfnOptions {
  FfnSchedule schedule = FfnSchedule::dense;
  BiasRule up_bias = BiasRule::fused_f32;
  Product product = Product::psi_f32;  // both projections' arithmetic
  std::int64_t hidden_tile = kHiddenTile;  // a multiple of kHiddenTile, or at least the hidden width
  std::int64_t out_tile = 1024;     // output channels per down-projection tile (any size)
};

// x [..., D] -> [..., D_out].
Bf16Tensor ffn(const Bf16Tensor& x, const FfnWeights& w, const FfnOptions& opt);

// The dense form's hidden activation bf(gelu(up(x))) [..., hidden], exposed for probes.
Bf16Tensor ffn_hidden(const Bf16Tensor& x, const FfnWeights& w, BiasRule up_bias,
                      Product product = Product::psi_f32);

}  // namespace psi::ops
