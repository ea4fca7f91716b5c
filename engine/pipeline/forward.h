#pragma once
// The LTXModel forward (spec §5): per-modality preprocessing (patchify projection, keyframe
// marker, timestep AdaLN, prompt AdaLN, cross-modal AdaLN and gates, RoPE), the blocks in order,
// and the output heads. Returns the two velocities. The blocks run in the numerics variant
// given; the model-level operators are the official ones in every variant. The same structure
// (forward_structure.h) also runs in float64: model_forward_f64.
#include <cstdint>
#include <functional>
#include <type_traits>

#include "engine/model/block.h"
#include "engine/model/block_f64.h"
#include "engine/model/config.h"
#include "engine/model/variant.h"
#include "engine/model/weights.h"

namespace psi::pipeline {

// E: the element type of the latent and of everything the model computes (Bf16, or double for
// the float64 reference).
template <class E>
struct ModalityInputOf {
  Tensor<E> latent;     // [1, N, 128] patchified
  float sigma = 1.0f;   // all tokens generated: timesteps = sigma
  F32Tensor positions;  // video [1, 3, N, 2], audio [1, 1, N, 2]
  Bf16Tensor context;   // [1, L, context width]
  std::int64_t first_frame_tokens = 0;  // video: tokens of latent frame 0 (the keyframe marker)
};

using ModalityInput = ModalityInputOf<Bf16>;

template <class E>
struct ModelOutputOf {
  Tensor<E> video_velocity, audio_velocity;
};
using ModelOutput = ModelOutputOf<Bf16>;

// The block inputs of each element type.
template <class E>
using BlockInputsOf = std::conditional_t<std::is_same_v<E, Bf16>, model::BlockInputs, model::BlockInputsF64>;

// Called after each block with its index (progress, interrupts, probes of block 0).
using BlockHook = std::function<void(int block, const model::BlockTaps& probes)>;
// Runs block `index` on prepared inputs; empty: model::block_forward on host tensors with the
// block's weights from `weights`. The PSI executor plugs in here to run blocks on the runtime.
using BlockRunner = std::function<model::BlockTaps(int index, const model::BlockInputs& in)>;

// Spec §5.1: everything the first block takes (patchify projection, keyframe marker, timestep,
// prompt and cross-modal AdaLN, RoPE tables), plus the embedded timesteps the output heads use.
// Its Linears (patchify, AdaLN) in `product`'s arithmetic, as the variant's blocks.
template <class E>
struct PreparedInputsOf {
  BlockInputsOf<E> blocks;
  Tensor<E> video_embedded, audio_embedded;
};
using PreparedInputs = PreparedInputsOf<Bf16>;
PreparedInputs prepare_inputs(const model::ModelConfig& c, model::TensorSource& weights, const ModalityInput& video,
                              const ModalityInput& audio, ops::Product product = ops::Product::psi_f32);

ModelOutput model_forward(const model::ModelConfig& c, model::TensorSource& weights,
                          const ModalityInput& video, const ModalityInput& audio,
                          const model::NumericsVariant& variant, const BlockHook& hook = {},
                          const BlockRunner& runner = {});

// The float64 reference forward: the same structure with every product in float64 (Eigen) and
// everything else in double, no BF16 write; the blocks are model::block_forward_f64, the RoPE
// tables and timestep sinusoids computed in double from the same positions and sigmas.
// `after_block` is called after each block with its index.
ModelOutputOf<double> model_forward_f64(const model::ModelConfig& c, model::TensorSource& weights,
                                        const ModalityInputOf<double>& video, const ModalityInputOf<double>& audio,
                                        const std::function<void(int block)>& after_block = {});

}  // namespace psi::pipeline
