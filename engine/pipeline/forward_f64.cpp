// The float64 reference forward: the model structure (forward_structure.h) in float64.
#include <cmath>

#include "engine/pipeline/forward.h"
#include "engine/pipeline/forward_structure.h"

namespace psi::pipeline {

F64Tensor F64Arith::linear(const F64Tensor& x, const Bf16Tensor& w, const Bf16Tensor* bias) const {
  return model::linear_f64(x, w, bias);
}

F64Tensor F64Arith::silu(const F64Tensor& x) const {
  F64Tensor y(x.shape);
  for (std::int64_t i = 0; i < x.numel(); ++i) y.data[i] = x.data[i] / (1.0 + std::exp(-x.data[i]));
  return y;
}

F64Tensor F64Arith::layer_norm(const F64Tensor& x, float eps) const {
  const std::int64_t d = x.shape.back(), rows = x.numel() / d;
  F64Tensor y(x.shape);
  for (std::int64_t r = 0; r < rows; ++r) {
    const double* in = x.ptr() + r * d;
    double mean = 0.0, var = 0.0;
    for (std::int64_t j = 0; j < d; ++j) mean += in[j];
    mean /= double(d);
    for (std::int64_t j = 0; j < d; ++j) var += (in[j] - mean) * (in[j] - mean);
    const double rstd = 1.0 / std::sqrt(var / double(d) + double(eps));
    for (std::int64_t j = 0; j < d; ++j) y.data[r * d + j] = (in[j] - mean) * rstd;
  }
  return y;
}

F64Tensor F64Arith::modulate(const F64Tensor& x, const F64Tensor& scale, const F64Tensor& shift) const {
  // scale and shift are one row [1, D], broadcast over tokens.
  const std::int64_t d = x.shape.back();
  if (scale.numel() != d || shift.numel() != d)
    throw Error("modulate (float64): scale " + shape_str(scale.shape) + " / shift " + shape_str(shift.shape) +
                " are not one row of " + std::to_string(d));
  F64Tensor y(x.shape);
  for (std::int64_t i = 0; i < x.numel(); ++i) y.data[i] = x.data[i] * (1.0 + scale.data[i % d]) + shift.data[i % d];
  return y;
}

model::BlockRopeOf<ops::RopeTablesF64> F64Arith::rope(const model::ModelConfig& c, const F32Tensor& video_positions,
                                                      const F32Tensor& audio_positions) const {
  return model::block_rope_f64(c, video_positions, audio_positions);
}

ModelOutputOf<double> model_forward_f64(const model::ModelConfig& c, model::TensorSource& weights,
                                        const ModalityInputOf<double>& video, const ModalityInputOf<double>& audio,
                                        const std::function<void(int block)>& after_block) {
  return forward(
      F64Arith{}, c, weights, video, audio,
      [&](int b, const model::BlockInputsF64& in) {
        return model::block_forward_f64(c, model::load_block_weights(weights, c, b), in);
      },
      [&](int b, const model::BlockTapsF64&) {
        if (after_block) after_block(b);
      });
}

}  // namespace psi::pipeline
