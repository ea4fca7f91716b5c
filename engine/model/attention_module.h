#pragma once
// One attention module of the block (spec §3.2 "Attention module"):
//   q = Linear_q(x), k = Linear_k(ctx), v = Linear_v(ctx)          BF16
//   q = RMSNorm_q(q), k = RMSNorm_k(k)                               over the full inner width
//   q = rope(q, q_rope), k = rope(k, k_rope)                          SPLIT, when tables given
//   a = sdpa(q, k, v)                                                 MATH or online (variant)
//   gated models: g = bf(2 · bf(sigmoid(Linear_gate(x)))) per head; a[h] = bf(a[h] · g[h])
//   out = Linear_out(a)                                               the module's probe value
// Every Linear in `product`'s arithmetic (gemm.h), both norms in `norm`'s (norm.h).
#include "engine/model/weights.h"
#include "engine/ops/attention.h"
#include "engine/ops/gemm.h"
#include "engine/ops/norm.h"
#include "engine/ops/rope.h"

namespace psi::model {

// Intermediates a probe may want (the recordings' q, k, v, sdpa_out, to_out_in).
struct AttentionTrace {
  Bf16Tensor q, k, v;    // as handed to the attention kernel (after norms and RoPE)
  Bf16Tensor sdpa_out;   // heads merged, before the gate
  Bf16Tensor to_out_in;  // after the gate (= sdpa_out when ungated)
};

// x [1, Nq, Dq], context [1, Nk, Dc] -> [1, Nq, Dq]. Null tables: no RoPE on that side.
Bf16Tensor attention_forward(const AttentionWeights& w, const Bf16Tensor& x, const Bf16Tensor& context,
                             const ops::RopeTables* q_rope, const ops::RopeTables* k_rope,
                             const ops::SdpaOptions& sdpa, float eps, ops::Product product, ops::NormKernel norm,
                             AttentionTrace* trace = nullptr);

}  // namespace psi::model
