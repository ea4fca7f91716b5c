#pragma once
// The LTXModel forward (spec §5): per-modality preprocessing (patchify projection, keyframe
// marker, timestep AdaLN, prompt AdaLN, cross-modal AdaLN and gates, RoPE), the blocks in order,
// and the output heads. Returns the two velocities. The blocks run in the numerics variant
// given; the model-level operators are the official ones in every variant.
#include <cstdint>
#include <functional>

#include "engine/model/block.h"
#include "engine/model/config.h"
#include "engine/model/variant.h"
#include "engine/model/weights.h"

namespace psi::pipeline {

struct ModalityInput {
  Bf16Tensor latent;    // [1, N, 128] patchified
  float sigma = 1.0f;   // all tokens generated: timesteps = sigma
  F32Tensor positions;  // video [1, 3, N, 2], audio [1, 1, N, 2]
  Bf16Tensor context;   // [1, L, context width]
  std::int64_t first_frame_tokens = 0;  // video: tokens of latent frame 0 (the keyframe marker)
};

struct ModelOutput {
  Bf16Tensor video_velocity, audio_velocity;
};

// Called after each block with its index (progress, interrupts, probes of block 0).
using BlockHook = std::function<void(int block, const model::BlockProbes& probes)>;
// Runs block `index` on prepared inputs; empty: model::block_forward on host tensors with the
// block's weights from `weights`. The PSI executor plugs in here to run blocks on the runtime.
using BlockRunner = std::function<model::BlockProbes(int index, const model::BlockInputs& in)>;

// Spec §5.1: everything the first block takes (patchify projection, keyframe marker, timestep,
// prompt and cross-modal AdaLN, RoPE tables), plus the embedded timesteps the output heads use.
// Its Linears (patchify, AdaLN) in `product`'s arithmetic, as the variant's blocks.
struct PreparedInputs {
  model::BlockInputs blocks;
  Bf16Tensor video_embedded, audio_embedded;
};
PreparedInputs prepare_inputs(const model::ModelConfig& c, model::WeightSource& weights, const ModalityInput& video,
                              const ModalityInput& audio, ops::Product product = ops::Product::psi_f32);

ModelOutput model_forward(const model::ModelConfig& c, model::WeightSource& weights,
                          const ModalityInput& video, const ModalityInput& audio,
                          const model::NumericsVariant& variant, const BlockHook& hook = {},
                          const BlockRunner& runner = {});

}  // namespace psi::pipeline
