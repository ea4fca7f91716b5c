#pragma once
// The float64 reference block: the dense block (block.h) in float64 from the same BF16 weights
// and inputs, converted to double once. Same operator order as block_forward (spec §3.3), with
// every BF16 write boundary removed: products in float64 (Eigen), everything else in double
// (std::exp, std::tanh, std::sqrt), the exact scale 1/√d, the tanh-GELU's constants in double.
// It stands for the real-arithmetic result of the block on these BF16 operands, so that the
// BF16 paths (official MATH and FLASH, dense, official-h200, baseline, modified) can be ranked
// by their distance to it.
#include <string>
#include <utility>
#include <vector>

#include "engine/model/block.h"

namespace psi::model {

// The ten probes (spec §8) in float64, shaped as BlockProbes'.
struct BlockProbesF64 {
  F64Tensor attn1, attn2, audio_attn1, audio_attn2, audio_to_video_attn, video_to_audio_attn;
  F64Tensor ff, audio_ff, video_out, audio_out;
  // (recording dataset name, tensor) in spec order, as BlockProbes::named.
  std::vector<std::pair<std::string, const F64Tensor*>> named() const;
};

BlockProbesF64 block_forward_f64(const ModelConfig& c, const BlockWeights& w, const BlockInputs& in);

// A float64 value correctly rounded to BF16 (nearest, ties to even; one rounding, not two).
Bf16 bf16_of_f64(double v);
Bf16Tensor round_to_bf16(const F64Tensor& t);

}  // namespace psi::model
