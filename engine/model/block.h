#pragma once
// The LTX-2.x audio-video transformer block on the CPU (spec §3.3), batch 1, for one numerics
// variant. Produces the ten probes of spec §8. The operator order is block_order.h's, which the
// float64 block (block_f64.h) and the PSI block program (engine/exec/block_program.h) share.
#include <algorithm>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "engine/error.h"
#include "engine/model/block_catalogue.h"
#include "engine/model/config.h"
#include "engine/model/variant.h"
#include "engine/model/weights.h"
#include "engine/ops/rope.h"

namespace psi::model {

// One modality's block inputs (spec §3.1). AdaLN timestep tensors are [1, 1 or N, k·D]; a single
// row is broadcast over tokens.
struct StreamInputs {
  Bf16Tensor x;                           // [1, N, D]
  Bf16Tensor timesteps;                   // [1, 1|N, rows·D]
  Bf16Tensor context;                     // [1, L, ctx width]
  Bf16Tensor prompt_timestep;             // [1, 1, 2·D]; empty: the prompt table alone (or no CA-AdaLN)
  ops::RopeTables pe;                     // self RoPE, [1, H, N, d/2]
  ops::RopeTables cross_pe;               // A/V cross RoPE, [1, H, N, av_d/2]
  Bf16Tensor cross_scale_shift_timestep;  // [1, 1|N, 4·D]
  Bf16Tensor cross_gate_timestep;         // [1, 1, D]
};

struct BlockInputs {
  StreamInputs video, audio;
};

// The four RoPE tables of a block from token positions ([1, 3, Nv, 2] and [1, 1, Na, 2]).
template <class Tables>
struct BlockRopeOf {
  Tables video, audio, video_cross, audio_cross;
};
using BlockRope = BlockRopeOf<ops::RopeTables>;
// `math`: the cos/sin of the tables (ops::rope_tables).
BlockRope block_rope(const ModelConfig& c, const F32Tensor& video_positions, const F32Tensor& audio_positions,
                     official::F32Math math = official::F32Math::host);
// The same four tables, each made by make(positions, max_pos, inner, heads, theta): block_rope
// with ops::rope_tables, the float64 reference model with ops::rope_tables_f64.
template <class Make>
auto block_rope_with(const ModelConfig& c, const F32Tensor& video_positions, const F32Tensor& audio_positions,
                     const Make& make) {
  if (video_positions.shape.size() != 4 || video_positions.dim(1) != 3)
    throw Error("block_rope: video positions must be [1, 3, N, 2], got " + shape_str(video_positions.shape));
  BlockRopeOf<decltype(make(video_positions, c.video_max_pos, c.video_dim(), c.video_heads, c.rope_theta))> r;
  r.video = make(video_positions, c.video_max_pos, c.video_dim(), c.video_heads, c.rope_theta);
  r.audio = make(audio_positions, c.audio_max_pos, c.audio_dim(), c.audio_heads, c.rope_theta);
  // Cross RoPE: the time axis of each modality, width audio_cross_attention_dim, each modality's
  // own head count (spec §4.4).
  const std::int64_t Nv = video_positions.dim(2);
  F32Tensor vt({1, 1, Nv, 2});
  std::copy(video_positions.data.begin(), video_positions.data.begin() + Nv * 2, vt.data.begin());
  const std::vector<double> cross_max{c.cross_max_pos()};
  r.video_cross = make(vt, cross_max, c.audio_cross_attention_dim, c.video_heads, c.rope_theta);
  r.audio_cross = make(audio_positions, cross_max, c.audio_cross_attention_dim, c.audio_heads, c.rope_theta);
  return r;
}

// SynthInit block inputs (names "input.synthetic.{video,audio}.*", per-batch timesteps, text
// contexts of `context_len` rows) with RoPE tables from the given positions: for runs and
// benchmarks that have no recording to read.
BlockInputs synthetic_block_inputs(const ModelConfig& c, const F32Tensor& video_positions,
                                   const F32Tensor& audio_positions, std::int64_t context_len,
                                   std::uint64_t seed);

// The ten taps of a tap set (BlockTaps, or the float64 block's), named as in the recordings
// (kTapNames), in spec order.
template <class P, class T = std::remove_reference_t<decltype(std::declval<const P&>().attn1)>>
std::vector<std::pair<std::string, const T*>> named_taps(const P& p) {
  const T* const members[] = {&p.attn1, &p.attn2, &p.audio_attn1, &p.audio_attn2, &p.audio_to_video_attn,
                              &p.video_to_audio_attn, &p.ff, &p.audio_ff, &p.video_out, &p.audio_out};
  static_assert(sizeof(members) / sizeof(members[0]) == kTapCount, "one member per tap name");
  std::vector<std::pair<std::string, const T*>> out;
  for (std::size_t i = 0; i < kTapCount; ++i) out.emplace_back(std::string(kTapNames[i]), members[i]);
  return out;
}

// The block's ten taps: the intermediate tensors spec §8 calls probes and the recordings store,
// named as there. psi says "tap" for them so that "probe" means a recorded case and the command.
struct BlockTaps {
  Bf16Tensor attn1, attn2, audio_attn1, audio_attn2, audio_to_video_attn, video_to_audio_attn;
  Bf16Tensor ff, audio_ff, video_out, audio_out;
  // (recording dataset name, tensor) in spec order.
  std::vector<std::pair<std::string, const Bf16Tensor*>> named() const;
};

// forced (teacher forcing, for attributing differences): every residual update reads forced's
// module output instead of the computed one, so each returned module tap is that module on
// the inputs the forced taps imply, and video_out / audio_out are the residual arithmetic
// applied to forced's updates. Null: the plain block.
BlockTaps block_forward(const ModelConfig& c, const BlockWeights& w, const BlockInputs& in,
                        const NumericsVariant& v, const BlockTaps* forced = nullptr);

}  // namespace psi::model
