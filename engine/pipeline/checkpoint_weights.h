#pragma once
// The model's (name, shape) -> tensor interface served from a checkpoint file (safetensors),
// so a user with the real LTX-2.x checkpoint can run psi on it. The shape psi expects must
// match the file's exactly.
#include <memory>
#include <string>

#include "engine/checkpoint/weight_source.h"
#include "engine/model/weights.h"

namespace psi::pipeline {

class CheckpointWeights : public model::TensorSource {
 public:
  explicit CheckpointWeights(std::shared_ptr<const ckpt::WeightSource> src) : src_(std::move(src)) {}
  Bf16Tensor load(const std::string& name, const Shape& shape) override;
  std::string describe() const override { return src_->describe(); }

 private:
  std::shared_ptr<const ckpt::WeightSource> src_;
};

// An official safetensors checkpoint (ckpt::open_official_checkpoint) as whole tensors.
std::unique_ptr<model::TensorSource> open_checkpoint(const std::string& path);

}  // namespace psi::pipeline
