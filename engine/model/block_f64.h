#pragma once
// The float64 reference block: the dense block (block.h) in float64 from the same BF16 weights
// and inputs, converted to double once. The operator order is block_forward's (spec §3.3,
// written once in block_order.h), with every BF16 write boundary removed: products in float64
// (Eigen), everything else in double (std::exp, std::tanh, std::sqrt), the exact scale 1/√d,
// the tanh-GELU's constants in double.
// It stands for the real-arithmetic result of the block on these BF16 operands, so that the
// BF16 paths (official MATH and FLASH, dense, official-h200, baseline, modified) can be ranked
// by their distance to it. Its inputs are either BF16 (a recording's, converted exactly) or the
// float64 values the float64 model computes (engine/pipeline: model_forward_f64).
#include <string>
#include <utility>
#include <vector>

#include "engine/model/block.h"

namespace psi::model {

// A stream's block inputs (StreamInputs) with the values a model computes in float64: the
// state, the AdaLN timestep tensors and the RoPE tables. The text context is a model input
// and stays BF16.
struct StreamInputsF64 {
  F64Tensor x;
  F64Tensor timesteps;
  Bf16Tensor context;
  F64Tensor prompt_timestep;  // empty: the prompt table alone (or no CA-AdaLN)
  ops::RopeTablesF64 pe, cross_pe;
  F64Tensor cross_scale_shift_timestep;
  F64Tensor cross_gate_timestep;
};
struct BlockInputsF64 {
  StreamInputsF64 video, audio;
};
// The four RoPE tables in real arithmetic (ops::rope_tables_f64).
BlockRopeOf<ops::RopeTablesF64> block_rope_f64(const ModelConfig& c, const F32Tensor& video_positions,
                                               const F32Tensor& audio_positions);
// BF16 block inputs (a recording's, or the BF16 pipeline's), each value exactly.
BlockInputsF64 to_f64(const BlockInputs& in);
F64Tensor to_f64(const Bf16Tensor& t);

// x · Wᵀ + b in float64 (Eigen), x [.., in], W [out, in]: the product the block's Linears use,
// for the model-level ones.
F64Tensor linear_f64(const F64Tensor& x, const Bf16Tensor& w, const Bf16Tensor* bias);

// The ten taps (spec §8's probes) in float64, shaped as BlockTaps'.
struct BlockTapsF64 {
  F64Tensor attn1, attn2, audio_attn1, audio_attn2, audio_to_video_attn, video_to_audio_attn;
  F64Tensor ff, audio_ff, video_out, audio_out;
  // (recording dataset name, tensor) in spec order, as BlockTaps::named.
  std::vector<std::pair<std::string, const F64Tensor*>> named() const;
};

BlockTapsF64 block_forward_f64(const ModelConfig& c, const BlockWeights& w, const BlockInputsF64& in);
BlockTapsF64 block_forward_f64(const ModelConfig& c, const BlockWeights& w, const BlockInputs& in);

// Each value correctly rounded to BF16 (bf16_of_f64).
Bf16Tensor round_to_bf16(const F64Tensor& t);

}  // namespace psi::model
