// The audio self-attention module probe: recorded x and RoPE tables in, q/k/v (as given to the
// attention kernel), sdpa_out, to_out_in, out and out_if_ungated compared with the MATH and
// FLASH recordings.
#include "engine/error.h"
#include "engine/interrupt.h"
#include "engine/model/attention_module.h"
#include "engine/ops/gemm.h"
#include "engine/sha256.h"
#include "probes/case_context.h"

namespace psi::probes::detail {

void run_attention_case(CaseContext& ctx) {
  Recording& rec = ctx.rec;
  // Norm eps, RoPE θ and the audio max position are the model's (identical in every config).
  const model::ModelConfig cfg = model::model_config("ltx2-22b");
  const Bf16Tensor x = rec.input_bf16("inputs/x");
  if (ctx.runtime)
    ctx.report.notes.push_back("attention: computed on the host (this probe has no runtime form; backend " +
                               std::string(rt::backend_name(*ctx.runtime)) + " not used)");
  ops::RopeTables pe{rec.input_bf16("inputs/pe_cos"), rec.input_bf16("inputs/pe_sin")};
  if (pe.cos.shape.size() != 4) throw Error(rec.path().string() + ": pe_cos is not [1, H, T, d/2]");
  const std::int64_t heads = pe.heads(), head_dim = 2 * pe.half();

  // The module's weights: every name in weights_json is "<module>.<param>".
  const Manifest declared = recording_manifest(rec);
  const auto specs = recorded_weights(declared);
  if (specs.empty()) throw Error(rec.path().string() + ": empty weights_json");
  const std::string first = specs.front().name;
  const std::string module = first.substr(0, first.rfind(".q_norm.weight"));
  ManifestSource src(declared, rec.seed());
  model::AttentionWeights w;
  w.heads = heads;
  w.head_dim = head_dim;
  for (const auto& s : specs) {
    const std::string param = s.name.substr(module.size() + 1);
    Bf16Tensor t = src.load(s.name, s.shape);
    if (param == "q_norm.weight") w.q_norm = std::move(t);
    else if (param == "k_norm.weight") w.k_norm = std::move(t);
    else if (param == "to_q.weight") w.to_q.w = std::move(t);
    else if (param == "to_q.bias") w.to_q.b = std::move(t);
    else if (param == "to_k.weight") w.to_k.w = std::move(t);
    else if (param == "to_k.bias") w.to_k.b = std::move(t);
    else if (param == "to_v.weight") w.to_v.w = std::move(t);
    else if (param == "to_v.bias") w.to_v.b = std::move(t);
    else if (param == "to_out.0.weight") w.to_out.w = std::move(t);
    else if (param == "to_out.0.bias") w.to_out.b = std::move(t);
    else if (param == "to_gate_logits.weight") w.to_gate_logits.w = std::move(t);
    else if (param == "to_gate_logits.bias") w.to_gate_logits.b = std::move(t);
    else throw Error(rec.path().string() + ": unexpected attention parameter " + s.name);
  }
  ctx.report.notes.push_back("weights: " + std::to_string(specs.size()) + " tensors of " + module + ", " + src.describe() +
                             ", names/shapes/SHA-256 equal to weights_json");

  // Our own tables from the recorded positions, against the recorded ones.
  if (rec.has("inputs/positions")) {
    const ops::RopeTables mine = ops::rope_tables(rec.input_f32("inputs/positions"), cfg.audio_max_pos,
                                                  heads * head_dim, heads, cfg.rope_theta);
    const bool eq = sha256_hex(mine.cos) == sha256_hex(pe.cos) && sha256_hex(mine.sin) == sha256_hex(pe.sin);
    ctx.report.notes.push_back(std::string("RoPE tables computed from the recorded positions: ") +
                               (eq ? "bitwise equal to the recorded pe_cos/pe_sin" : "DIFFER from the recorded tables") +
                               " (the recorded tables are used)");
  }

  Bf16Tensor rec_q, rec_k, rec_v;
  if (rec.has("math/q") && rec.has("math/k") && rec.has("math/v")) {
    StoredTensor q = rec.stored_bf16("math/q"), k = rec.stored_bf16("math/k"), v = rec.stored_bf16("math/v");
    if (q.full && k.full && v.full) rec_q = std::move(q.data), rec_k = std::move(k.data), rec_v = std::move(v.data);
  }
  for (const auto& v : ctx.variants) {
    check_interrupt("probe " + ctx.report.case_name + ", variant " + v.name);  // where a stop inside it is said to be
    model::AttentionTrace tr;
    Bf16Tensor out = model::attention_forward(w, x, x, &pe, &pe, v.sdpa(head_dim), cfg.norm_eps, v.product, v.norm, &tr);
    Bf16Tensor ungated = ops::linear(tr.sdpa_out, w.to_out.w, w.to_out.bias(), psi::BiasRule::fused_f32, v.product);
    Outputs o;
    o.emplace_back("q", std::move(tr.q));
    o.emplace_back("k", std::move(tr.k));
    o.emplace_back("v", std::move(tr.v));
    o.emplace_back("sdpa_out", std::move(tr.sdpa_out));
    o.emplace_back("to_out_in", std::move(tr.to_out_in));
    o.emplace_back("out", std::move(out));
    o.emplace_back("out_if_ungated", std::move(ungated));
    // The attention kernel alone: the variant's SDPA on the recorded MATH q, k, v, so that
    // projection and norm differences upstream do not enter.
    if (rec_q.numel()) {
      Bf16Tensor isolated(rec_q.shape);
      ops::sdpa(psi::as_matrix(rec_q), psi::as_matrix(rec_k), psi::as_matrix(rec_v), heads, v.sdpa(head_dim),
                psi::as_matrix(isolated));
      o.emplace_back("sdpa_out.on_recorded_qkv", std::move(isolated));
    }
    compare_and_keep(ctx, v.name, std::move(o), {"math", "flash"});
  }
}

}  // namespace psi::probes::detail
