#include "engine/pipeline/checkpoint_weights.h"

#include "engine/checkpoint/safetensors.h"
#include "engine/error.h"

namespace psi::pipeline {

Bf16Tensor CheckpointWeights::load(const std::string& name, const Shape& shape) {
  if (!src_->contains(name)) throw Error(src_->describe() + ": no tensor '" + name + "'");
  const Shape have = src_->shape(name);
  if (have != shape)
    throw Error(src_->describe() + ": tensor '" + name + "' has shape " + shape_str(have) + ", the model needs " +
                shape_str(shape));
  Bf16Tensor t(shape);
  const ckpt::Matrix2d m = ckpt::matrix_view(shape);
  if (t.numel() > 0) src_->read(name, ckpt::Slice{0, m.rows, 0, m.cols}, t.span());
  return t;
}

std::unique_ptr<model::TensorSource> open_checkpoint(const std::string& path) {
  return std::make_unique<CheckpointWeights>(ckpt::open_official_checkpoint(path));
}

}  // namespace psi::pipeline
