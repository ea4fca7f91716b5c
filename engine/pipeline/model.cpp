#include "engine/pipeline/model.h"

#include "engine/error.h"
#include "engine/ops/adaln.h"
#include "engine/ops/gemm.h"
#include "engine/ops/norm.h"
#include "engine/pipeline/timestep.h"

namespace psi::pipeline {

namespace {

struct Prepared {
  Bf16Tensor x;                // [1, N, D]
  AdaLnOut main;               // embedded [1, D], mod [1, rows·D]
  model::StreamInputs stream;  // everything the blocks take, except RoPE (set by the caller)
};

// Spec §5.1 for one modality. `own` is this modality, `other_sigma` the other one's sigma
// (the A/V gate is conditioned on it).
Prepared prepare(const model::ModelConfig& c, model::WeightSource& w, const ModalityInput& in,
                 float other_sigma, bool video, ops::Product product) {
  const std::string pre = video ? "" : "audio_";
  const std::int64_t d = video ? c.video_dim() : c.audio_dim();
  const std::int64_t channels = video ? c.in_channels : c.audio_in_channels;
  if (in.latent.shape.size() != 3 || in.latent.dim(2) != channels)
    throw Error(std::string(video ? "video" : "audio") + " latent " + shape_str(in.latent.shape) +
                " is not [1, N, " + std::to_string(channels) + "]");
  Prepared p;
  const Bf16Tensor pw = w.load(pre + "patchify_proj.weight", {d, channels});
  const Bf16Tensor pb = w.load(pre + "patchify_proj.bias", {d});
  p.x = ops::linear(in.latent, pw, &pb, ops::BiasRule::fused_f32, product);

  if (video && c.features.keyframes_abs_pos_embedding) {
    // x = bf(x + bf(m·E)) with m = 1 on the first latent frame's tokens, 0 elsewhere; done
    // literally, since even a zero E turns -0 into +0.
    const Bf16Tensor e = w.load("keyframes_abs_pos_embedding", {1, d});
    const std::int64_t n = p.x.dim(1);
    for (std::int64_t t = 0; t < n; ++t) {
      const float m = t < in.first_frame_tokens ? 1.0f : 0.0f;
      for (std::int64_t j = 0; j < d; ++j) {
        Bf16& v = p.x.data[t * d + j];
        v = bf16_rne(v.to_float() + bf(m * e.data[j].to_float()));
      }
    }
  }

  const float tau = in.sigma * float(c.timestep_scale_multiplier);
  const std::int64_t rows = c.features.ada_rows();
  p.main = adaln_single(w, pre + "adaln_single", d, rows, tau, product);
  model::StreamInputs& s = p.stream;
  s.timesteps = p.main.mod;
  s.timesteps.shape = {1, 1, rows * d};
  s.context = in.context;
  if (c.features.cross_attention_adaln) {
    AdaLnOut prompt = adaln_single(w, pre + "prompt_adaln_single", d, 2, tau, product);
    s.prompt_timestep = prompt.mod;
    s.prompt_timestep.shape = {1, 1, 2 * d};
  }
  const std::string av = video ? "av_ca_video_scale_shift_adaln_single" : "av_ca_audio_scale_shift_adaln_single";
  s.cross_scale_shift_timestep = adaln_single(w, av, d, 4, tau, product).mod;
  s.cross_scale_shift_timestep.shape = {1, 1, 4 * d};
  const float gate_tau = (other_sigma * float(c.timestep_scale_multiplier)) *
                         float(c.features.av_ca_timestep_scale_multiplier / c.timestep_scale_multiplier);
  const std::string gate = video ? "av_ca_a2v_gate_adaln_single" : "av_ca_v2a_gate_adaln_single";
  s.cross_gate_timestep = adaln_single(w, gate, d, 1, gate_tau, product).mod;
  s.cross_gate_timestep.shape = {1, 1, d};
  return p;
}

// Spec §5.2 step 9: LayerNorm, modulation by the output table + embedded timestep, proj_out.
Bf16Tensor output_head(const model::ModelConfig& c, model::WeightSource& w, const Bf16Tensor& x,
                       const Bf16Tensor& embedded, bool video, ops::Product product) {
  const std::string pre = video ? "" : "audio_";
  const std::int64_t d = video ? c.video_dim() : c.audio_dim();
  const std::int64_t out_ch = video ? c.out_channels : c.audio_out_channels;
  const Bf16Tensor table = w.load(pre + "scale_shift_table", {2, d});
  Bf16Tensor shift({1, d}), scale({1, d});
  for (std::int64_t j = 0; j < d; ++j) {
    shift.data[j] = bf16_rne(table.data[j].to_float() + embedded.data[j].to_float());
    scale.data[j] = bf16_rne(table.data[d + j].to_float() + embedded.data[j].to_float());
  }
  Bf16Tensor y(x.shape);
  ops::layer_norm(ops::as_matrix(x), c.norm_eps, ops::as_matrix(y));
  y = ops::modulate(y, scale, shift);
  const Bf16Tensor ow = w.load(pre + "proj_out.weight", {out_ch, d});
  const Bf16Tensor ob = w.load(pre + "proj_out.bias", {out_ch});
  return ops::linear(y, ow, &ob, ops::BiasRule::fused_f32, product);
}

}  // namespace

PreparedInputs prepare_inputs(const model::ModelConfig& c, model::WeightSource& weights, const ModalityInput& video,
                              const ModalityInput& audio, ops::Product product) {
  Prepared v = prepare(c, weights, video, audio.sigma, true, product);
  Prepared a = prepare(c, weights, audio, video.sigma, false, product);
  model::BlockRope rope = model::block_rope(c, video.positions, audio.positions);
  PreparedInputs out;
  model::BlockInputs& in = out.blocks;
  in.video = std::move(v.stream);
  in.audio = std::move(a.stream);
  in.video.pe = std::move(rope.video);
  in.video.cross_pe = std::move(rope.video_cross);
  in.audio.pe = std::move(rope.audio);
  in.audio.cross_pe = std::move(rope.audio_cross);
  in.video.x = std::move(v.x);
  in.audio.x = std::move(a.x);
  out.video_embedded = std::move(v.main.embedded);
  out.audio_embedded = std::move(a.main.embedded);
  return out;
}

ModelOutput model_forward(const model::ModelConfig& c, model::WeightSource& weights,
                          const ModalityInput& video, const ModalityInput& audio,
                          const model::NumericsVariant& variant, const BlockHook& hook,
                          const BlockRunner& runner) {
  PreparedInputs p = prepare_inputs(c, weights, video, audio, variant.product);
  model::BlockInputs& in = p.blocks;
  for (int b = 0; b < int(c.layers); ++b) {
    model::BlockProbes probes = runner ? runner(b, in)
                                       : model::block_forward(c, model::load_block_weights(weights, c, b), in, variant);
    in.video.x = probes.video_out;
    in.audio.x = probes.audio_out;
    if (hook) hook(b, probes);
  }
  ModelOutput out;
  out.video_velocity = output_head(c, weights, in.video.x, p.video_embedded, true, variant.product);
  out.audio_velocity = output_head(c, weights, in.audio.x, p.audio_embedded, false, variant.product);
  return out;
}

}  // namespace psi::pipeline
