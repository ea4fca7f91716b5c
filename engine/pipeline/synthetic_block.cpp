#include "engine/pipeline/synthetic_block.h"

#include "engine/model/weights.h"
#include "engine/pipeline/positions.h"
#include "engine/synthinit.h"

namespace psi::pipeline {

model::BlockInputs synthetic_block_inputs(const model::ModelConfig& c, const SyntheticShape& s, std::uint64_t seed) {
  const std::int64_t Nv = s.frames * s.height * s.width, Na = s.audio_tokens, L = s.context_rows;
  const std::int64_t Dv = c.video_dim(), Da = c.audio_dim(), rows = c.features.ada_rows();
  auto make = [&](const std::string& name, const Shape& shape) {
    return synthinit::make("input.psi." + name, shape, seed);
  };
  auto stream = [&](const std::string& n, std::int64_t N, std::int64_t D, std::int64_t Dc) {
    model::StreamInputs in;
    in.x = make(n + ".x", {1, N, D});
    const std::int64_t Ts = s.per_token_timesteps ? N : 1;
    in.timesteps = make(n + ".timesteps", {1, Ts, rows * D});
    in.context = make(n + ".context", {1, L, Dc});
    if (s.prompt_timestep && c.features.cross_attention_adaln) in.prompt_timestep = make(n + ".prompt_timestep", {1, 1, 2 * D});
    in.cross_scale_shift_timestep = make(n + ".cross_scale_shift_timestep", {1, Ts, 4 * D});
    in.cross_gate_timestep = make(n + ".cross_gate_timestep", {1, 1, D});
    return in;
  };
  model::BlockInputs b{stream("video", Nv, Dv, c.cross_attention_dim),
                       stream("audio", Na, Da, c.audio_cross_attention_dim)};
  const model::BlockRope rope = model::block_rope(c, video_positions(s.frames, s.height, s.width, 24.0f),
                                                  audio_positions(Na));
  b.video.pe = rope.video;
  b.video.cross_pe = rope.video_cross;
  b.audio.pe = rope.audio;
  b.audio.cross_pe = rope.audio_cross;
  return b;
}

std::map<std::string, Shape, std::less<>> block_tensor_shapes(const model::ModelConfig& c) {
  std::map<std::string, Shape, std::less<>> out;
  for (int i = 0; i < int(c.layers); ++i)
    for (const model::WeightSpec& w : model::block_weight_specs(c, i)) out.emplace(w.name, w.shape);
  return out;
}

ckpt::SynthSource synthetic_weights(const model::ModelConfig& c, std::uint64_t seed) {
  return ckpt::SynthSource(seed, block_tensor_shapes(c));
}

}  // namespace psi::pipeline
