#include "engine/pipeline/forward.h"

#include "engine/ops/activation.h"
#include "engine/ops/adaln.h"
#include "engine/ops/norm.h"
#include "engine/pipeline/forward_structure.h"

namespace psi::pipeline {

Bf16Tensor Bf16Arith::linear(const Bf16Tensor& x, const Bf16Tensor& w, const Bf16Tensor* bias) const {
  return ops::linear(x, w, bias, psi::BiasRule::fused_f32, product);
}

Bf16Tensor Bf16Arith::silu(const Bf16Tensor& x) const {
  Bf16Tensor y(x.shape);
  ops::silu(x.ptr(), y.ptr(), x.numel());
  return y;
}

Bf16Tensor Bf16Arith::layer_norm(const Bf16Tensor& x, float eps) const {
  Bf16Tensor y(x.shape);
  ops::layer_norm(psi::as_matrix(x), eps, psi::as_matrix(y), norm);
  return y;
}

Bf16Tensor Bf16Arith::modulate(const Bf16Tensor& x, const Bf16Tensor& scale, const Bf16Tensor& shift) const {
  return ops::modulate(x, scale, shift);
}

model::BlockRope Bf16Arith::rope(const model::ModelConfig& c, const F32Tensor& video_positions,
                                 const F32Tensor& audio_positions) const {
  return model::block_rope(c, video_positions, audio_positions, math);
}

PreparedInputs prepare_inputs(const model::ModelConfig& c, model::TensorSource& weights, const ModalityInput& video,
                              const ModalityInput& audio, ops::Product product) {
  return prepare_model_inputs(Bf16Arith{product}, c, weights, video, audio);
}

ModelOutput model_forward(const model::ModelConfig& c, model::TensorSource& weights,
                          const ModalityInput& video, const ModalityInput& audio,
                          const model::NumericsVariant& variant, const BlockHook& hook,
                          const BlockRunner& runner) {
  return forward(
      Bf16Arith{variant.product, variant.norm, variant.model_math}, c, weights, video, audio,
      [&](int b, const model::BlockInputs& in) {
        return runner ? runner(b, in) : model::block_forward(c, model::load_block_weights(weights, c, b), in, variant);
      },
      [&](int b, const model::BlockTaps& probes) {
        if (hook) hook(b, probes);
      });
}

}  // namespace psi::pipeline
