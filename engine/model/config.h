#pragma once
// Model configurations: the single source of truth for dimensions and feature flags.
//
// Configs (spec §1.2; all with 4x FFN widths, eps 1e-6, RoPE θ 10000, SPLIT RoPE):
//   tiny      — exactly the recorded trajectory_tiny model: 2 blocks, video 256 = 2x128,
//               audio 128 = 2x64, text context widths 256 / 128.
//   small     — the block of the block_small recordings: video 512 = 4x128, audio 256 = 4x64,
//               text context widths 512 / 256; one block.
//   ltx2-22b  — full size: 48 blocks, video 4096 = 32x128, audio 2048 = 32x64, contexts
//               4096 / 2048.
// Feature profiles (the recordings' profile_*_features root attributes):
//   ltx25 (default) — gated attention, cross-attention AdaLN (9-row tables + prompt tables), no
//                     video FFN bias, audio FFN bias, float64 RoPE grid, A/V gate multiplier 1000,
//                     keyframe embedding, ancestral stage-1 sampler.
//   ltx2            — no gating, no cross-attention AdaLN (6-row tables), FFN biases on both
//                     streams, float64 RoPE grid, A/V gate multiplier 1, deterministic sampler.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/model/block_catalogue.h"

namespace psi::model {

struct Features {
  std::string profile;
  bool gated_attention = true;
  bool cross_attention_adaln = true;
  bool ff_bias = false;
  bool audio_ff_bias = true;
  bool double_precision_rope = true;
  double av_ca_timestep_scale_multiplier = 1000.0;
  bool keyframes_abs_pos_embedding = true;
  bool ancestral_stage1 = true;

  int ada_rows() const { return cross_attention_adaln ? ada_row::count_ca_adaln : ada_row::count; }
};

Features features_for(std::string_view profile);  // "ltx25" or "ltx2"; else psi::Error

struct ModelConfig {
  std::string name;
  Features features;
  std::int64_t layers = 0;
  std::int64_t video_heads = 0, video_head_dim = 0;
  std::int64_t audio_heads = 0, audio_head_dim = 0;
  std::int64_t cross_attention_dim = 0;        // video text-context width
  std::int64_t audio_cross_attention_dim = 0;  // audio text-context width; A/V RoPE width
  std::int64_t in_channels = 128, out_channels = 128;
  std::int64_t audio_in_channels = 128, audio_out_channels = 128;
  std::int64_t ffn_mult = 4;
  float norm_eps = 1e-6f;
  double rope_theta = 10000.0;
  std::vector<double> video_max_pos{20.0, 2048.0, 2048.0};
  std::vector<double> audio_max_pos{20.0};
  double timestep_scale_multiplier = 1000.0;

  std::int64_t video_dim() const { return video_heads * video_head_dim; }
  std::int64_t audio_dim() const { return audio_heads * audio_head_dim; }
  std::int64_t video_hidden() const { return ffn_mult * video_dim(); }
  std::int64_t audio_hidden() const { return ffn_mult * audio_dim(); }
  // Both A/V cross-attentions use the audio head geometry (spec §1.2).
  std::int64_t av_heads() const { return audio_heads; }
  std::int64_t av_head_dim() const { return audio_head_dim; }
  std::int64_t av_inner() const { return audio_heads * audio_head_dim; }
  // Cross RoPE: time axis only, max position max(video t, audio t).
  double cross_max_pos() const;
};

// "tiny", "small", "ltx2-22b" with a feature profile; an unknown name is a psi::Error.
ModelConfig model_config(std::string_view name, std::string_view profile = "ltx25");
std::vector<std::string> model_config_names();

}  // namespace psi::model
