#pragma once
// Numerics variants: the write-boundary and partitioning choices that distinguish the dense
// reference from the PSI forms, in one struct. Everything not listed here is the official
// operator order and BF16 write boundaries of the spec (§3, §9) in every variant.
//
// | variant       | attention                     | P before P·V        | FFN                        | FFN up-projection bias  | projections (every Linear) |
// |---------------|-------------------------------|---------------------|----------------------------|-------------------------|----------------------------|
// | dense         | MATH (whole score matrix), psi's reduce.h sums and std::exp | float32, normalized | whole tensors | bf(acc + b)  (official) | psi's float32 order |
// | official-h200 | MATH, the H200 core (attention_math.h): FMA-chain GEMMs, warp/block softmax, libdevice expf | float32, normalized | whole tensors | bf(acc + b)  (official) | H200 tensor core (tensor_core.h); RMS norms and LayerNorm: the H200 kernels (norm.h) |
// | official-h200-flash | FLASH, the H200 core (attention_flash.h): FlashAttention-2's forward, split-KV and combine | BF16, unnormalized | whole tensors | bf(acc + b)  (official) | as official-h200 |
// | baseline      | online softmax, 128-key tiles | BF16 (all heads)    | 1,024-channel tiles, reuse | bf(bf(acc) + b)         | psi's float32 order        |
// | modified      | online softmax, 128-key tiles | float32 for 64-dim heads, BF16 for wider heads | 1,024-channel tiles, reuse | bf(acc + b) | psi's float32 order |
//
// dense is psi's stand-in for the official MATH path; official-h200 is dense with every
// projection computed as the H200's tensor cores computed the recorded official projections
// and the attention core and the RMS norms as the H200 computed them (bitwise those recordings
// and every probe of the recorded small blocks; softmax rows of more than 2,048 keys take the
// modelled cunn_SoftMaxForwardReg, attention_math.h; the output head's LayerNorm is the
// modelled Welford kernel, norm.h; the token positions, RoPE tables and timestep sinusoid take
// libdevice's cosf/sinf/expf and PyTorch's division by a scalar, nv_trig.h; the elementwise
// operators are dense's, which are the kernels' formulas, docs/official-kernels.md); baseline
// is the paper's baseline PSI (the biased up-projection written BF16 before its bias is added,
// then GELU written BF16; FlashAttention-style BF16 numerator weights); modified is the paper's
// modified PSI (the audio FFN bias added in float32 before the single BF16 write; float32 online
// accumulation for the 64-dimensional audio and A/V heads). The FFN tiles are bitwise neutral (ffn.h), so dense and
// modified FFNs agree bit for bit. official-h200-flash is official-h200 with every attention
// through the SDPA FLASH core as the H200 computed it (the official path production runs use).
//
// A variant's claim names the recorded official path it reproduces bit for bit: official-h200
// the MATH recording, official-h200-flash the FLASH one; the others claim nothing (their
// distances are measurements). `psi probe --require-bitwise` checks exactly the claims.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/official/nv_trig.h"
#include "engine/ops/attention.h"
#include "engine/ops/ffn.h"
#include "engine/ops/gemm.h"
#include "engine/ops/norm.h"

namespace psi::model {

struct NumericsVariant {
  std::string name;
  std::string summary;
  ops::SoftmaxForm attention = ops::SoftmaxForm::math;
  ops::AttentionCore core = ops::AttentionCore::psi_f32;  // whole-tensor attention's arithmetic
  std::int64_t key_tile = 128;          // online attention only
  bool p_bf16_narrow_heads = true;      // online: P rounded to BF16 for heads of <= 64 channels
  bool p_bf16_wide_heads = true;        // online: P rounded to BF16 for wider heads (128)
  ops::FfnSchedule ffn_schedule = ops::FfnSchedule::dense;
  std::int64_t ffn_hidden_tile = ops::kHiddenTile;  // min(this, hidden) for small models
  psi::BiasRule ffn_up_bias = psi::BiasRule::fused_f32;  // every FFN up-projection that has a bias
  // Every Linear's accumulator arithmetic, and the per-shape kernel choices (kernel_config.h)
  // that the official products and the official MATH core's two products take.
  ops::Product product = ops::Product::psi_f32;
  ops::NormKernel norm = ops::NormKernel::psi_f32;       // every RMS norm's arithmetic
  // positions, RoPE tables and timestep sinusoid (model level, outside the blocks' kernels)
  official::F32Math model_math = official::F32Math::host;
  // The recorded official path this variant reproduces bit for bit ("math", "flash"), or empty.
  // A recording of one path only (the projection probes, "official") is claimed by every
  // variant that claims a path: both official paths compute the projections alike.
  std::string claims;
  int flash_steps = 0;  // core h200_math_to_flash: how many of FLASH's steps (math_to_flash.h)

  // The dense forms (MATH attention, whole-tensor FFN) run on whole host tensors; the PSI
  // forms through the executor's arena.
  bool whole_tensors() const { return attention == ops::SoftmaxForm::math && ffn_schedule == ops::FfnSchedule::dense; }

  // This variant with the kernel choices `kernels` (null: the recorded ones). Only the official
  // arithmetic has kernels to choose: psi's own ignores them.
  NumericsVariant with_kernels(official::KernelConfigRef kernels) const;

  // The attention kernel options for heads of width head_dim.
  ops::SdpaOptions sdpa(std::int64_t head_dim) const;
  // The FFN options for a hidden width.
  ops::FfnOptions ffn(std::int64_t hidden) const;
};

// "dense", "official-h200", "official-h200-flash", "baseline", "modified", or one of the
// math-to-flash steps below; an unknown name is a psi::Error.
const NumericsVariant& numerics_variant(std::string_view name);
// The five numerics variants above (what --variant all means), not the steps.
std::vector<std::string> numerics_variant_names();

// "math-to-flash-K", K = 1 … 6: official-h200 with every attention through the MATH core with
// FLASH's first K steps (official::sdpa_math_to_flash); official-h200 is step 0, official-h200-flash
// step 7. What psi run block-controls attributes the FLASH-vs-MATH differences with.
const NumericsVariant& math_to_flash_variant(int steps);

}  // namespace psi::model
