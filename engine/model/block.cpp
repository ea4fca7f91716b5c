#include "engine/model/block.h"

#include "engine/error.h"
#include "engine/model/attention_module.h"
#include "engine/official/kernel_config.h"
#include "engine/ops/adaln.h"
#include "engine/ops/ffn.h"
#include "engine/ops/norm.h"
#include "engine/synthinit.h"

namespace psi::model {

namespace {

using ops::ada_value;

// A table row on its own, as a [1, D] modulation (prompt tables without a prompt timestep).
Bf16Tensor table_row(const Bf16Tensor& table, int row) {
  const std::int64_t D = table.dim(1);
  Bf16Tensor out({1, D});
  for (std::int64_t c = 0; c < D; ++c) out.data[c] = table.data[row * D + c];
  return out;
}

Bf16Tensor ffn_forward(const FfnWeightsOwned& w, const Bf16Tensor& x, const NumericsVariant& v) {
  ops::FfnWeights fw{&w.up.w, w.up.bias(), &w.down.w, w.down.bias()};
  return ops::ffn(x, fw, v.ffn(w.up.w.dim(0)));
}

// Steps 1–10 of spec §3.3 for one stream: self-attention, then text cross-attention.
struct SelfAndText {
  Bf16Tensor o_attn1, o_attn2, x2;
};

// forced_attn1/forced_attn2 (teacher forcing, block_forward): the module outputs the residual
// updates read instead of the computed ones; null: the computed ones.
SelfAndText self_and_text(const ModelConfig& c, const AttentionWeights& attn1, const AttentionWeights& attn2,
                          const Bf16Tensor& table, const Bf16Tensor& prompt_table, const StreamInputs& in,
                          const NumericsVariant& v, const Bf16Tensor* forced_attn1, const Bf16Tensor* forced_attn2) {
  const float eps = c.norm_eps;
  SelfAndText r;
  const Bf16Tensor shift_msa = ada_value(table, in.timesteps, ada_row::shift_msa);
  const Bf16Tensor scale_msa = ada_value(table, in.timesteps, ada_row::scale_msa);
  const Bf16Tensor gate_msa = ada_value(table, in.timesteps, ada_row::gate_msa);
  const Bf16Tensor h = ops::ada_zero(in.x, scale_msa, shift_msa, eps, v.norm);
  {
    const official::ProductSite site("attn1");
    r.o_attn1 = attention_forward(attn1, h, h, &in.pe, &in.pe, v.sdpa(attn1.head_dim), eps, v.product, v.norm);
  }
  const official::ProductSite site("attn2");
  const ops::PostSa ps = ops::post_sa(in.x, forced_attn1 ? *forced_attn1 : r.o_attn1, gate_msa, eps, v.norm);
  if (c.features.cross_attention_adaln) {
    const Bf16Tensor shift_q = ada_value(table, in.timesteps, ada_row::shift_q);
    const Bf16Tensor scale_q = ada_value(table, in.timesteps, ada_row::scale_q);
    const Bf16Tensor gate_q = ada_value(table, in.timesteps, ada_row::gate_q);
    const bool has_prompt = in.prompt_timestep.numel() > 0;
    const auto prompt = [&](int row) {
      return has_prompt ? ada_value(prompt_table, in.prompt_timestep, row) : table_row(prompt_table, row);
    };
    const Bf16Tensor shift_kv = prompt(prompt_row::shift_kv);
    const Bf16Tensor scale_kv = prompt(prompt_row::scale_kv);
    const Bf16Tensor q_in = ops::modulate(ps.normed, scale_q, shift_q);
    const Bf16Tensor c_in = ops::modulate(in.context, scale_kv, shift_kv);
    r.o_attn2 = attention_forward(attn2, q_in, c_in, nullptr, nullptr, v.sdpa(attn2.head_dim), eps, v.product, v.norm);
    r.x2 = ops::gated_residual(ps.x, forced_attn2 ? *forced_attn2 : r.o_attn2, gate_q);
  } else {
    r.o_attn2 = attention_forward(attn2, ps.normed, in.context, nullptr, nullptr, v.sdpa(attn2.head_dim), eps, v.product, v.norm);
    r.x2 = ops::residual(ps.x, forced_attn2 ? *forced_attn2 : r.o_attn2);
  }
  return r;
}

void check_inputs(const ModelConfig& c, const BlockInputs& in) {
  auto want = [](const Bf16Tensor& t, std::int64_t width, const char* what) {
    if (t.shape.size() != 3 || t.dim(0) != 1 || t.dim(2) != width)
      throw Error(std::string("block input ") + what + " is " + shape_str(t.shape) + ", expected [1, N, " +
                  std::to_string(width) + "]");
  };
  const std::int64_t rows = c.features.ada_rows();
  want(in.video.x, c.video_dim(), "video.x");
  want(in.audio.x, c.audio_dim(), "audio.x");
  want(in.video.context, c.cross_attention_dim, "video.context");
  want(in.audio.context, c.audio_cross_attention_dim, "audio.context");
  if (in.video.timesteps.shape.back() != rows * c.video_dim() || in.audio.timesteps.shape.back() != rows * c.audio_dim())
    throw Error("block inputs: timesteps " + shape_str(in.video.timesteps.shape) + " / " +
                shape_str(in.audio.timesteps.shape) + " do not hold " + std::to_string(rows) + " AdaLN rows");
}

}  // namespace

BlockRope block_rope(const ModelConfig& c, const F32Tensor& video_positions, const F32Tensor& audio_positions,
                     official::F32Math math) {
  return block_rope_with(c, video_positions, audio_positions,
                         [math](const F32Tensor& positions, const std::vector<double>& max_pos, std::int64_t inner,
                                std::int64_t heads, double theta) {
                           return ops::rope_tables(positions, max_pos, inner, heads, theta, math);
                         });
}

BlockInputs synthetic_block_inputs(const ModelConfig& c, const F32Tensor& video_positions,
                                   const F32Tensor& audio_positions, std::int64_t context_len,
                                   std::uint64_t seed) {
  const BlockRope rope = block_rope(c, video_positions, audio_positions);
  const std::int64_t rows = c.features.ada_rows();
  auto stream = [&](const std::string& s, std::int64_t n, std::int64_t D, std::int64_t ctx_width,
                    const ops::RopeTables& pe, const ops::RopeTables& cross_pe) {
    auto in = [&](const std::string& name, Shape shape) {
      return synthinit::make("input.synthetic." + s + "." + name, shape, seed);
    };
    StreamInputs r;
    r.x = in("x", {1, n, D});
    r.timesteps = in("timesteps", {1, 1, rows * D});
    r.context = in("context", {1, context_len, ctx_width});
    if (c.features.cross_attention_adaln) r.prompt_timestep = in("prompt_timestep", {1, 1, prompt_row::count * D});
    r.pe = pe;
    r.cross_pe = cross_pe;
    r.cross_scale_shift_timestep = in("cross_scale_shift_timestep", {1, 1, av_row::timestep_rows * D});
    r.cross_gate_timestep = in("cross_gate_timestep", {1, 1, D});
    return r;
  };
  return {stream("video", video_positions.dim(2), c.video_dim(), c.cross_attention_dim, rope.video, rope.video_cross),
          stream("audio", audio_positions.dim(2), c.audio_dim(), c.audio_cross_attention_dim, rope.audio,
                 rope.audio_cross)};
}

std::vector<std::pair<std::string, const Bf16Tensor*>> BlockTaps::named() const { return named_taps(*this); }

BlockTaps block_forward(const ModelConfig& c, const BlockWeights& w, const BlockInputs& in,
                        const NumericsVariant& v, const BlockTaps* forced) {
  check_inputs(c, in);
  const float eps = c.norm_eps;
  BlockTaps p;
  // The module output a residual update reads: the forced one when teacher forcing.
  auto upd = [&](const Bf16Tensor BlockTaps::*m) -> const Bf16Tensor& { return forced ? forced->*m : p.*m; };

  // Video and audio self-attention and text cross-attention (steps 1–10).
  SelfAndText vs, as;
  {
    const official::ProductSite site("video");
    vs = self_and_text(c, w.attn1, w.attn2, w.scale_shift_table, w.prompt_scale_shift_table, in.video, v,
                       forced ? &forced->attn1 : nullptr, forced ? &forced->attn2 : nullptr);
  }
  {
    const official::ProductSite site("audio");
    as = self_and_text(c, w.audio_attn1, w.audio_attn2, w.audio_scale_shift_table, w.audio_prompt_scale_shift_table,
                       in.audio, v, forced ? &forced->audio_attn1 : nullptr, forced ? &forced->audio_attn2 : nullptr);
  }
  p.attn1 = std::move(vs.o_attn1);
  p.attn2 = std::move(vs.o_attn2);
  p.audio_attn1 = std::move(as.o_attn1);
  p.audio_attn2 = std::move(as.o_attn2);
  const Bf16Tensor& vx_pre = vs.x2;  // both directions read the pre-A/V snapshots
  const Bf16Tensor& ax_pre = as.x2;
  const Bf16Tensor& tv = w.scale_shift_table_a2v_ca_video;
  const Bf16Tensor& ta = w.scale_shift_table_a2v_ca_audio;
  const Bf16Tensor& vss = in.video.cross_scale_shift_timestep;
  const Bf16Tensor& ass = in.audio.cross_scale_shift_timestep;

  // A2V (step 11): video queries, audio keys/values. A/V tables list scale before shift.
  Bf16Tensor vx3;
  {
    const official::ProductSite site("a2v");
    const Bf16Tensor q_in =
        ops::ada_zero(vx_pre, ada_value(tv, vss, av_row::a2v_scale), ada_value(tv, vss, av_row::a2v_shift), eps, v.norm);
    const Bf16Tensor kv_in =
        ops::ada_zero(ax_pre, ada_value(ta, ass, av_row::a2v_scale), ada_value(ta, ass, av_row::a2v_shift), eps, v.norm);
    p.audio_to_video_attn = attention_forward(w.audio_to_video_attn, q_in, kv_in, &in.video.cross_pe,
                                              &in.audio.cross_pe, v.sdpa(w.audio_to_video_attn.head_dim), eps, v.product, v.norm);
    vx3 = ops::gated_residual(vx_pre, upd(&BlockTaps::audio_to_video_attn),
                              ada_value(tv, av_row::gate, in.video.cross_gate_timestep, 0));
  }
  // V2A (step 12): audio queries, video keys/values (the pre-A2V video state).
  Bf16Tensor ax3;
  {
    const official::ProductSite site("v2a");
    const Bf16Tensor q_in =
        ops::ada_zero(ax_pre, ada_value(ta, ass, av_row::v2a_scale), ada_value(ta, ass, av_row::v2a_shift), eps, v.norm);
    const Bf16Tensor kv_in =
        ops::ada_zero(vx_pre, ada_value(tv, vss, av_row::v2a_scale), ada_value(tv, vss, av_row::v2a_shift), eps, v.norm);
    p.video_to_audio_attn = attention_forward(w.video_to_audio_attn, q_in, kv_in, &in.audio.cross_pe,
                                              &in.video.cross_pe, v.sdpa(w.video_to_audio_attn.head_dim), eps, v.product, v.norm);
    ax3 = ops::gated_residual(ax_pre, upd(&BlockTaps::video_to_audio_attn),
                              ada_value(ta, av_row::gate, in.audio.cross_gate_timestep, 0));
  }

  // Feed-forwards (steps 13–14).
  {
    const Bf16Tensor& t = w.scale_shift_table;
    const official::ProductSite site("video.ff");
    const Bf16Tensor h = ops::ada_zero(vx3, ada_value(t, in.video.timesteps, ada_row::scale_mlp),
                                       ada_value(t, in.video.timesteps, ada_row::shift_mlp), eps, v.norm);
    p.ff = ffn_forward(w.ff, h, v);
    p.video_out =
        ops::gated_residual(vx3, upd(&BlockTaps::ff), ada_value(t, in.video.timesteps, ada_row::gate_mlp));
  }
  {
    const Bf16Tensor& t = w.audio_scale_shift_table;
    const official::ProductSite site("audio.ff");
    const Bf16Tensor h = ops::ada_zero(ax3, ada_value(t, in.audio.timesteps, ada_row::scale_mlp),
                                       ada_value(t, in.audio.timesteps, ada_row::shift_mlp), eps, v.norm);
    p.audio_ff = ffn_forward(w.audio_ff, h, v);
    p.audio_out =
        ops::gated_residual(ax3, upd(&BlockTaps::audio_ff), ada_value(t, in.audio.timesteps, ada_row::gate_mlp));
  }
  return p;
}

}  // namespace psi::model
