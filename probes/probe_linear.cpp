// Projection probes: audio-ff-up (Linear with bias, then tanh-GELU) and video-q-proj (Linear
// with bias). Weight names and shapes come from the group's weights_json; values are SynthInit
// with the file's seed, checked against weights_json (probes/provenance.h).
#include "engine/error.h"
#include "engine/interrupt.h"
#include "engine/ops/activation.h"
#include "engine/ops/gemm.h"
#include "engine/runtime/whole_linear.h"
#include "probes/case_context.h"

namespace psi::probes::detail {

namespace {

struct LinearParams {
  Bf16Tensor w, b;
};

LinearParams load_linear(CaseContext& ctx) {
  const Manifest declared = recording_manifest(ctx.rec);
  const auto specs = recorded_weights(declared);
  ManifestSource src(declared, ctx.rec.seed());
  LinearParams p;
  for (const auto& s : specs) {
    const bool is_w = s.name.ends_with(".weight"), is_b = s.name.ends_with(".bias");
    if (is_w && p.w.numel() == 0) p.w = src.load(s.name, s.shape);
    else if (is_b && p.b.numel() == 0) p.b = src.load(s.name, s.shape);
    else
      throw Error(ctx.rec.path().string() + ": weights_json of " + ctx.rec.group() +
                  " should hold one weight and one bias, found also " + s.name);
  }
  if (p.w.numel() == 0) throw Error(ctx.rec.path().string() + ": weights_json of " + ctx.rec.group() + " has no weight");
  ctx.report.notes.push_back("weights: " + std::to_string(specs.size()) + " tensors from weights_json, " + src.describe() +
                             ", names/shapes/SHA-256 equal to weights_json");
  return p;
}

}  // namespace

void run_linear_case(CaseContext& ctx, const std::string& case_name) {
  const Bf16Tensor x = ctx.rec.input_bf16("x");
  const LinearParams p = load_linear(ctx);
  const Bf16Tensor* bias = p.b.numel() ? &p.b : nullptr;
  const auto linear = [&](psi::BiasRule rule, ops::Product product) {
    if (!ctx.runtime) return ops::linear(x, p.w, bias, rule, product);
    rt::WholeLinear r = rt::whole_linear(std::string(rt::backend_name(*ctx.runtime)), x, p.w, bias, rule, product);
    const std::string note = "projection: one whole product on backend " + r.backend;
    if (ctx.report.notes.back() != note) ctx.report.notes.push_back(note);
    return std::move(r.y);
  };
  for (const auto& v : ctx.variants) {
    check_interrupt("probe " + ctx.report.case_name + ", variant " + v.name);  // where a stop inside it is said to be
    Outputs out;
    if (case_name == "audio-ff-up") {
      // The FFN up-projection: the variant decides where its bias enters.
      Bf16Tensor proj = linear(v.ffn_up_bias, v.product);
      Bf16Tensor gelu(proj.shape);
      ops::gelu_tanh(proj.ptr(), gelu.ptr(), proj.numel());
      out.emplace_back("proj_out", std::move(proj));
      out.emplace_back("gelu_out", std::move(gelu));
    } else {
      out.emplace_back("q", linear(psi::BiasRule::fused_f32, v.product));
    }
    compare_and_keep(ctx, v.name, std::move(out), {""});
  }
}

}  // namespace psi::probes::detail
