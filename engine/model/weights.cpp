#include "engine/model/weights.h"

#include "engine/error.h"
#include "engine/model/block_catalogue.h"
#include "engine/synthinit.h"

namespace psi::model {

namespace {

struct AttnGeometry {
  std::string name;
  std::int64_t query_dim, context_dim, heads, head_dim;
  AttentionWeights BlockWeights::*member;
};

std::vector<AttnGeometry> attention_geometries(const ModelConfig& c) {
  const std::int64_t Dv = c.video_dim(), Da = c.audio_dim();
  const StreamNames &v = kVideoNames, &a = kAudioNames;
  return {
      {v.attn1, Dv, Dv, c.video_heads, c.video_head_dim, &BlockWeights::attn1},
      {v.attn2, Dv, c.cross_attention_dim, c.video_heads, c.video_head_dim, &BlockWeights::attn2},
      {a.attn1, Da, Da, c.audio_heads, c.audio_head_dim, &BlockWeights::audio_attn1},
      {a.attn2, Da, c.audio_cross_attention_dim, c.audio_heads, c.audio_head_dim, &BlockWeights::audio_attn2},
      {v.av_attn, Dv, Da, c.av_heads(), c.av_head_dim(), &BlockWeights::audio_to_video_attn},
      {a.av_attn, Da, Dv, c.av_heads(), c.av_head_dim(), &BlockWeights::video_to_audio_attn},
  };
}

void attention_specs(const ModelConfig& c, const AttnGeometry& g, const std::string& p,
                     std::vector<WeightSpec>& out) {
  const std::int64_t inner = g.heads * g.head_dim;
  const std::string m = p + g.name + ".";
  out.push_back({m + weight_of(layer::q_norm), {inner}});
  out.push_back({m + weight_of(layer::k_norm), {inner}});
  out.push_back({m + weight_of(layer::to_q), {inner, g.query_dim}});
  out.push_back({m + bias_of(layer::to_q), {inner}});
  out.push_back({m + weight_of(layer::to_k), {inner, g.context_dim}});
  out.push_back({m + bias_of(layer::to_k), {inner}});
  out.push_back({m + weight_of(layer::to_v), {inner, g.context_dim}});
  out.push_back({m + bias_of(layer::to_v), {inner}});
  if (c.features.gated_attention) {
    out.push_back({m + weight_of(layer::to_gate_logits), {g.heads, g.query_dim}});
    out.push_back({m + bias_of(layer::to_gate_logits), {g.heads}});
  }
  out.push_back({m + weight_of(layer::to_out), {g.query_dim, inner}});
  out.push_back({m + bias_of(layer::to_out), {g.query_dim}});
}

void ffn_specs(const std::string& m, std::int64_t dim, std::int64_t hidden, bool bias,
               std::vector<WeightSpec>& out) {
  out.push_back({m + weight_of(layer::ff_up), {hidden, dim}});
  if (bias) out.push_back({m + bias_of(layer::ff_up), {hidden}});
  out.push_back({m + weight_of(layer::ff_down), {dim, hidden}});
  if (bias) out.push_back({m + bias_of(layer::ff_down), {dim}});
}

}  // namespace

Bf16Tensor SynthInitSource::load(const std::string& name, const Shape& shape) {
  return synthinit::make(name, shape, seed_);
}

std::string SynthInitSource::describe() const { return "SynthInit v1, seed " + std::to_string(seed_); }

std::vector<WeightSpec> block_weight_specs(const ModelConfig& c, int index) {
  const std::string p = block_prefix(index);
  const StreamNames &v = kVideoNames, &a = kAudioNames;
  const std::int64_t Dv = c.video_dim(), Da = c.audio_dim();
  const std::int64_t rows = c.features.ada_rows();
  std::vector<WeightSpec> out;
  out.push_back({p + v.table, {rows, Dv}});
  out.push_back({p + a.table, {rows, Da}});
  out.push_back({p + a.av_table, {av_row::table_rows, Da}});
  out.push_back({p + v.av_table, {av_row::table_rows, Dv}});
  if (c.features.cross_attention_adaln) {
    out.push_back({p + v.prompt_table, {prompt_row::count, Dv}});
    out.push_back({p + a.prompt_table, {prompt_row::count, Da}});
  }
  const auto geos = attention_geometries(c);
  attention_specs(c, geos[0], p, out);
  attention_specs(c, geos[1], p, out);
  ffn_specs(p + v.ff + ".", Dv, c.video_hidden(), c.features.ff_bias, out);
  attention_specs(c, geos[2], p, out);
  attention_specs(c, geos[3], p, out);
  ffn_specs(p + a.ff + ".", Da, c.audio_hidden(), c.features.audio_ff_bias, out);
  attention_specs(c, geos[4], p, out);
  attention_specs(c, geos[5], p, out);
  return out;
}

BlockWeights load_block_weights(TensorSource& src, const ModelConfig& c, int index) {
  const std::string p = block_prefix(index);
  const StreamNames &v = kVideoNames, &a = kAudioNames;
  // Loads by spec so names and shapes come from block_weight_specs alone.
  std::vector<WeightSpec> specs = block_weight_specs(c, index);
  auto get = [&](const std::string& suffix) -> Bf16Tensor {
    for (const auto& s : specs)
      if (s.name == p + suffix) return src.load(s.name, s.shape);
    return Bf16Tensor();
  };
  auto linear = [&](const std::string& m) { return LinearWeights{get(weight_of(m)), get(bias_of(m))}; };
  auto in = [](const std::string& module, const char* name) { return module + "." + name; };
  BlockWeights w;
  for (const auto& g : attention_geometries(c)) {
    AttentionWeights m;
    m.heads = g.heads;
    m.head_dim = g.head_dim;
    m.to_q = linear(in(g.name, layer::to_q));
    m.to_k = linear(in(g.name, layer::to_k));
    m.to_v = linear(in(g.name, layer::to_v));
    m.to_out = linear(in(g.name, layer::to_out));
    m.to_gate_logits = linear(in(g.name, layer::to_gate_logits));
    m.q_norm = get(weight_of(in(g.name, layer::q_norm)));
    m.k_norm = get(weight_of(in(g.name, layer::k_norm)));
    w.*g.member = std::move(m);
  }
  w.ff = {linear(in(v.ff, layer::ff_up)), linear(in(v.ff, layer::ff_down))};
  w.audio_ff = {linear(in(a.ff, layer::ff_up)), linear(in(a.ff, layer::ff_down))};
  w.scale_shift_table = get(v.table);
  w.audio_scale_shift_table = get(a.table);
  w.prompt_scale_shift_table = get(v.prompt_table);
  w.audio_prompt_scale_shift_table = get(a.prompt_table);
  w.scale_shift_table_a2v_ca_video = get(v.av_table);
  w.scale_shift_table_a2v_ca_audio = get(a.av_table);
  return w;
}

}  // namespace psi::model
