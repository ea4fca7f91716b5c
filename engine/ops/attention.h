#pragma once
// Scaled dot-product attention over heads split along the channel axis (head h owns columns
// [h·d, (h+1)·d)), no causal mask, scale 1/√d. Two forms:
//
// MATH (dense path; PyTorch's SDPA MATH backend, spec §7): q and k widened to float32 and each
// multiplied by c = f32(√(1/√d)); scores S = (c·q)(c·k)ᵀ as a float32 GEMM; optional additive
// mask; safe softmax p = exp(s − max) / Σ exp(s − max) in float32 (a fully masked row gives
// zeros); O = P·V as a float32 GEMM; one BF16 write.
//
// ONLINE (the PSI partitioned form, FlashAttention-style): the same scores, visited in key
// tiles of `key_tile` keys. Per query row and head, with running max m (from −∞), running sum
// l (from 0) and float32 accumulator o (from 0), for each tile in key order:
//   m' = max(m, max_j s_j);  α = exp(m − m');  p_j = exp(s_j − m')
//   l  = l·α + Σ_j p_j           (tile sum of the float32 p_j in the reduce.h order)
//   o  = o·α, then o += P_j · v_j for j in key order, P_j = bf(p_j) (p_bf16) or p_j
// and finally out = bf(o / l) (0 when every key was masked). With p_bf16 this is the paper's
// baseline (BF16 numerator weights, float32 normalizer, as FlashAttention kernels do); without
// it, float32 throughout.
//
// All sums (score dots, softmax sums, P·V in the MATH form) follow reduce.h.
#include <cstdint>

#include "engine/ops/matrix.h"

namespace psi::ops {

enum class SoftmaxForm { math, online };

struct SdpaOptions {
  SoftmaxForm form = SoftmaxForm::math;
  std::int64_t key_tile = 128;  // online only; any positive size, the last tile may be shorter
  bool p_bf16 = true;           // online only
  // Additive float32 mask [Nq, Nk] (row stride Nk) shared by all heads, or null. −∞ masks.
  const float* mask = nullptr;
};

// q [Nq, H·d], k and v [Nk, H·d], out [Nq, H·d].
void sdpa(CBf16Mat q, CBf16Mat k, CBf16Mat v, std::int64_t heads, const SdpaOptions& opt,
          Bf16Mat out);

// f32(√(1/√d)), the factor MATH applies to q and to k.
float sdpa_qk_factor(std::int64_t head_dim);

}  // namespace psi::ops
