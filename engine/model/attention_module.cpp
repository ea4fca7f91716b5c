#include "engine/model/attention_module.h"

#include "engine/error.h"
#include "engine/official/kernel_config.h"
#include "engine/ops/activation.h"
#include "engine/ops/gemm.h"
#include "engine/ops/norm.h"

namespace psi::model {

Bf16Tensor attention_forward(const AttentionWeights& w, const Bf16Tensor& x, const Bf16Tensor& context,
                             const ops::RopeTables* q_rope, const ops::RopeTables* k_rope,
                             const ops::SdpaOptions& sdpa, float eps, ops::Product product, ops::NormKernel norm,
                             AttentionTrace* trace) {
  const std::int64_t H = w.heads, d = w.head_dim;
  // Each product named for the shape log (kernel_config.h).
  const auto named_linear = [&](const char* site, const Bf16Tensor& in, const LinearWeights& l) {
    const official::ProductSite s(site);
    return ops::linear(in, l.w, l.bias(), psi::BiasRule::fused_f32, product);
  };
  Bf16Tensor v = named_linear("to_v", context, w.to_v);
  Bf16Tensor q = ops::rms_norm(named_linear("to_q", x, w.to_q), &w.q_norm, eps, norm);
  Bf16Tensor k = ops::rms_norm(named_linear("to_k", context, w.to_k), &w.k_norm, eps, norm);
  if (q.shape.back() != H * d)
    throw Error("attention: q width " + std::to_string(q.shape.back()) + " for " + std::to_string(H) +
                " heads of " + std::to_string(d));
  if (q_rope) ops::apply_split_rope(psi::as_matrix(q), *q_rope);
  if (k_rope) ops::apply_split_rope(psi::as_matrix(k), *k_rope);
  Bf16Tensor a(q.shape);
  {
    const official::ProductSite s("sdpa");
    ops::sdpa(psi::as_matrix(q), psi::as_matrix(k), psi::as_matrix(v), H, sdpa, psi::as_matrix(a));
  }
  if (trace) {
    trace->q = q;
    trace->k = k;
    trace->v = v;
    trace->sdpa_out = a;
  }
  if (w.gated()) {
    Bf16Tensor z = named_linear("to_gate_logits", x, w.to_gate_logits);
    ops::sigmoid(z.ptr(), z.ptr(), z.numel());
    auto A = psi::as_matrix(a);
    auto Z = psi::as_matrix(z);
    for (std::int64_t r = 0; r < A.rows; ++r)
      for (std::int64_t h = 0; h < H; ++h) {
        const float g = bf(2.0f * Z.at(r, h).to_float());
        Bf16* head = A.row(r) + h * d;
        for (std::int64_t c = 0; c < d; ++c) head[c] = bf16_rne(head[c].to_float() * g);
      }
  }
  if (trace) trace->to_out_in = a;
  return named_linear("to_out", a, w.to_out);
}

}  // namespace psi::model
