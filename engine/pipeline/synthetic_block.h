#pragma once
// Synthetic block inputs and weight sources for running a block without recordings (tests,
// benches, the block probes' executor run): SynthInit v1 values for every input and weight.
// Here rather than beside the PSI executor because it is input generation, and this is the
// lowest layer that sees both the block's inputs (model) and the SynthInit source (checkpoint).
#include <cstdint>
#include <map>
#include <string>

#include "engine/checkpoint/synth_source.h"
#include "engine/model/block.h"
#include "engine/model/config.h"

namespace psi::pipeline {

struct SyntheticShape {
  std::int64_t frames = 1, height = 4, width = 4;  // video latent grid (tokens = F·H·W)
  std::int64_t audio_tokens = 8;
  std::int64_t context_rows = 16;                  // text rows of both streams
  bool prompt_timestep = true;                     // CA-AdaLN prompt timesteps given
  bool per_token_timesteps = false;                // AdaLN timesteps [1, N, k·D] instead of [1, 1, k·D]
};

// Inputs named "input.psi.<stream>.<field>" (SynthInit role input), and RoPE tables of the official positions of that grid (24 fps) and audio tokens.
model::BlockInputs synthetic_block_inputs(const model::ModelConfig& c, const SyntheticShape& s, std::uint64_t seed);

// Every tensor of the config's blocks with its shape (model::block_weight_specs).
std::map<std::string, Shape, std::less<>> block_tensor_shapes(const model::ModelConfig& c);

// The SynthInit source of every block tensor.
ckpt::SynthSource synthetic_weights(const model::ModelConfig& c, std::uint64_t seed);

}  // namespace psi::pipeline
