#include "engine/model/weights.h"

#include "engine/error.h"
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
  return {
      {"attn1", Dv, Dv, c.video_heads, c.video_head_dim, &BlockWeights::attn1},
      {"attn2", Dv, c.cross_attention_dim, c.video_heads, c.video_head_dim, &BlockWeights::attn2},
      {"audio_attn1", Da, Da, c.audio_heads, c.audio_head_dim, &BlockWeights::audio_attn1},
      {"audio_attn2", Da, c.audio_cross_attention_dim, c.audio_heads, c.audio_head_dim, &BlockWeights::audio_attn2},
      {"audio_to_video_attn", Dv, Da, c.av_heads(), c.av_head_dim(), &BlockWeights::audio_to_video_attn},
      {"video_to_audio_attn", Da, Dv, c.av_heads(), c.av_head_dim(), &BlockWeights::video_to_audio_attn},
  };
}

std::string prefix(int index) { return "transformer_blocks." + std::to_string(index) + "."; }

void attention_specs(const ModelConfig& c, const AttnGeometry& g, const std::string& p,
                     std::vector<WeightSpec>& out) {
  const std::int64_t inner = g.heads * g.head_dim;
  const std::string m = p + g.name + ".";
  out.push_back({m + "q_norm.weight", {inner}});
  out.push_back({m + "k_norm.weight", {inner}});
  out.push_back({m + "to_q.weight", {inner, g.query_dim}});
  out.push_back({m + "to_q.bias", {inner}});
  out.push_back({m + "to_k.weight", {inner, g.context_dim}});
  out.push_back({m + "to_k.bias", {inner}});
  out.push_back({m + "to_v.weight", {inner, g.context_dim}});
  out.push_back({m + "to_v.bias", {inner}});
  if (c.features.gated_attention) {
    out.push_back({m + "to_gate_logits.weight", {g.heads, g.query_dim}});
    out.push_back({m + "to_gate_logits.bias", {g.heads}});
  }
  out.push_back({m + "to_out.0.weight", {g.query_dim, inner}});
  out.push_back({m + "to_out.0.bias", {g.query_dim}});
}

void ffn_specs(const std::string& m, std::int64_t dim, std::int64_t hidden, bool bias,
               std::vector<WeightSpec>& out) {
  out.push_back({m + "net.0.proj.weight", {hidden, dim}});
  if (bias) out.push_back({m + "net.0.proj.bias", {hidden}});
  out.push_back({m + "net.2.weight", {dim, hidden}});
  if (bias) out.push_back({m + "net.2.bias", {dim}});
}

}  // namespace

Bf16Tensor SynthInitSource::load(const std::string& name, const Shape& shape) {
  return synthinit::make(name, shape, seed_);
}

std::string SynthInitSource::describe() const { return "SynthInit v1, seed " + std::to_string(seed_); }

std::vector<WeightSpec> block_weight_specs(const ModelConfig& c, int index) {
  const std::string p = prefix(index);
  const std::int64_t Dv = c.video_dim(), Da = c.audio_dim();
  const std::int64_t rows = c.features.ada_rows();
  std::vector<WeightSpec> out;
  out.push_back({p + "scale_shift_table", {rows, Dv}});
  out.push_back({p + "audio_scale_shift_table", {rows, Da}});
  out.push_back({p + "scale_shift_table_a2v_ca_audio", {5, Da}});
  out.push_back({p + "scale_shift_table_a2v_ca_video", {5, Dv}});
  if (c.features.cross_attention_adaln) {
    out.push_back({p + "prompt_scale_shift_table", {2, Dv}});
    out.push_back({p + "audio_prompt_scale_shift_table", {2, Da}});
  }
  const auto geos = attention_geometries(c);
  attention_specs(c, geos[0], p, out);
  attention_specs(c, geos[1], p, out);
  ffn_specs(p + "ff.", Dv, c.video_hidden(), c.features.ff_bias, out);
  attention_specs(c, geos[2], p, out);
  attention_specs(c, geos[3], p, out);
  ffn_specs(p + "audio_ff.", Da, c.audio_hidden(), c.features.audio_ff_bias, out);
  attention_specs(c, geos[4], p, out);
  attention_specs(c, geos[5], p, out);
  return out;
}

BlockWeights load_block_weights(WeightSource& src, const ModelConfig& c, int index) {
  const std::string p = prefix(index);
  // Loads by spec so names and shapes come from block_weight_specs alone.
  std::vector<WeightSpec> specs = block_weight_specs(c, index);
  auto get = [&](const std::string& suffix) -> Bf16Tensor {
    for (const auto& s : specs)
      if (s.name == p + suffix) return src.load(s.name, s.shape);
    return Bf16Tensor();
  };
  auto linear = [&](const std::string& m) {
    return LinearWeights{get(m + ".weight"), get(m + ".bias")};
  };
  BlockWeights w;
  for (const auto& g : attention_geometries(c)) {
    AttentionWeights a;
    a.heads = g.heads;
    a.head_dim = g.head_dim;
    a.to_q = linear(g.name + ".to_q");
    a.to_k = linear(g.name + ".to_k");
    a.to_v = linear(g.name + ".to_v");
    a.to_out = linear(g.name + ".to_out.0");
    a.to_gate_logits = linear(g.name + ".to_gate_logits");
    a.q_norm = get(g.name + ".q_norm.weight");
    a.k_norm = get(g.name + ".k_norm.weight");
    w.*g.member = std::move(a);
  }
  w.ff = {linear("ff.net.0.proj"), linear("ff.net.2")};
  w.audio_ff = {linear("audio_ff.net.0.proj"), linear("audio_ff.net.2")};
  w.scale_shift_table = get("scale_shift_table");
  w.audio_scale_shift_table = get("audio_scale_shift_table");
  w.prompt_scale_shift_table = get("prompt_scale_shift_table");
  w.audio_prompt_scale_shift_table = get("audio_prompt_scale_shift_table");
  w.scale_shift_table_a2v_ca_video = get("scale_shift_table_a2v_ca_video");
  w.scale_shift_table_a2v_ca_audio = get("scale_shift_table_a2v_ca_audio");
  return w;
}

}  // namespace psi::model
