#pragma once
// Block weights by their official checkpoint names (`transformer_blocks.{i}.…`, spec §2.2),
// loaded whole through a small (name, shape) -> BF16 tensor interface (TensorSource) so that any
// source (SynthInit here; a safetensors file elsewhere) plugs in. The runtime's pages read
// slices through another, ckpt::WeightSource (engine/checkpoint/weight_source.h).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/model/config.h"
#include "engine/tensor.h"

namespace psi::model {

class TensorSource {
 public:
  virtual ~TensorSource() = default;
  // The tensor `name` with exactly `shape`; a missing tensor or another shape is a psi::Error.
  virtual Bf16Tensor load(const std::string& name, const Shape& shape) = 0;
  virtual std::string describe() const = 0;
};

// SynthInit v1 values for global seed G (shared/spec/synthetic-weights.md).
class SynthInitSource : public TensorSource {
 public:
  explicit SynthInitSource(std::uint64_t seed) : seed_(seed) {}
  Bf16Tensor load(const std::string& name, const Shape& shape) override;
  std::string describe() const override;

 private:
  std::uint64_t seed_;
};

struct WeightSpec {
  std::string name;
  Shape shape;
};

// Every tensor of block `index` under the config's feature profile, in a fixed order.
std::vector<WeightSpec> block_weight_specs(const ModelConfig& c, int index);

struct LinearWeights {
  Bf16Tensor w;  // [out, in]
  Bf16Tensor b;  // [out], or empty (numel 0) when the layer has no bias
  const Bf16Tensor* bias() const { return b.numel() ? &b : nullptr; }
};

struct AttentionWeights {
  std::int64_t heads = 0, head_dim = 0;
  LinearWeights to_q, to_k, to_v, to_out;
  LinearWeights to_gate_logits;  // empty w when the model has no gated attention
  Bf16Tensor q_norm, k_norm;
  bool gated() const { return to_gate_logits.w.numel() > 0; }
};

struct FfnWeightsOwned {
  LinearWeights up, down;
};

struct BlockWeights {
  AttentionWeights attn1, attn2, audio_attn1, audio_attn2, audio_to_video_attn, video_to_audio_attn;
  FfnWeightsOwned ff, audio_ff;
  Bf16Tensor scale_shift_table;               // [9 or 6, Dv]
  Bf16Tensor audio_scale_shift_table;         // [9 or 6, Da]
  Bf16Tensor prompt_scale_shift_table;        // [2, Dv], CA-AdaLN only
  Bf16Tensor audio_prompt_scale_shift_table;  // [2, Da], CA-AdaLN only
  Bf16Tensor scale_shift_table_a2v_ca_video;  // [5, Dv]
  Bf16Tensor scale_shift_table_a2v_ca_audio;  // [5, Da]
};

BlockWeights load_block_weights(TensorSource& src, const ModelConfig& c, int index);

}  // namespace psi::model
