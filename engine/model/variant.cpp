#include "engine/model/variant.h"

#include <algorithm>

#include "engine/error.h"
#include "engine/official/math_to_flash.h"

namespace psi::model {

namespace {

std::vector<NumericsVariant> make_variants() {
  NumericsVariant dense;
  dense.name = "dense";
  dense.summary = "official operator order and BF16 write boundaries on whole tensors, MATH attention";

  NumericsVariant official = dense;
  official.name = "official-h200";
  official.summary = "dense with every projection as the H200 tensor cores compute it (block FMA of 16 "
                     "products, truncating alignment, FP32 bias epilogue) and the MATH attention core as "
                     "the H200 computes it (FMA-chain GEMMs, warp and block softmax, libdevice expf), and every RMS "
                     "norm and the output LayerNorm as PyTorch's kernels run on the H200 (their reduction orders, "
                     "MUFU.RSQ), and the token positions, RoPE tables and timestep sinusoid as PyTorch computes them on "
                     "CUDA (libdevice cosf/sinf/expf, division by a scalar as a product with its reciprocal): the "
                     "official bits";
  official.product = ops::Product::h200_tensor_core;
  official.core = ops::AttentionCore::h200_math;
  official.norm = ops::NormKernel::h200;
  official.model_math = official::F32Math::cuda;
  official.claims = "math";

  NumericsVariant flash = official;
  flash.name = "official-h200-flash";
  flash.summary = "official-h200 with every attention through the SDPA FLASH core as the H200 computes it "
                  "(FlashAttention-2's forward: tensor-core products, ex2.approx, BF16 P, the split-KV kernel and "
                  "its log-sum-exp combine with libdevice logf): the official FLASH bits";
  flash.core = ops::AttentionCore::h200_flash;
  flash.claims = "flash";

  NumericsVariant baseline;
  baseline.name = "baseline";
  baseline.summary = "paper's baseline PSI: online attention with BF16 P, 1024-channel FFN tiles, "
                     "FFN up-projection written BF16 before its bias";
  baseline.attention = ops::SoftmaxForm::online;
  baseline.p_bf16_narrow_heads = true;
  baseline.p_bf16_wide_heads = true;
  baseline.ffn_schedule = ops::FfnSchedule::reuse;
  baseline.ffn_up_bias = psi::BiasRule::after_bf16;

  NumericsVariant modified;
  modified.name = "modified";
  modified.summary = "paper's modified PSI: FFN up-projection bias in float32 before one BF16 write, "
                     "float32 P for 64-dim heads";
  modified.attention = ops::SoftmaxForm::online;
  modified.p_bf16_narrow_heads = false;
  modified.p_bf16_wide_heads = true;
  modified.ffn_schedule = ops::FfnSchedule::reuse;
  modified.ffn_up_bias = psi::BiasRule::fused_f32;

  return {dense, official, flash, baseline, modified};
}

const std::vector<NumericsVariant>& variants() {
  static const std::vector<NumericsVariant> v = make_variants();
  return v;
}

const std::vector<NumericsVariant>& step_variants() {
  static const std::vector<NumericsVariant> steps = [] {
    std::vector<NumericsVariant> s;
    for (int k = 1; k < official::kMathToFlashSteps; ++k) {
      NumericsVariant v = numerics_variant("official-h200");
      v.name = "math-to-flash-" + std::to_string(k);
      v.summary = "official-h200 with the MATH attention core given FLASH's first " + std::to_string(k) +
                  " steps (engine/official/math_to_flash.h), the last: " + official::math_to_flash_step_name(k);
      v.core = ops::AttentionCore::h200_math_to_flash;
      v.flash_steps = k;
      v.claims.clear();
      s.push_back(std::move(v));
    }
    return s;
  }();
  return steps;
}

}  // namespace

NumericsVariant NumericsVariant::with_kernels(official::KernelConfigRef kernels) const {
  NumericsVariant v = *this;
  v.product.kernels = std::move(kernels);
  return v;
}

ops::SdpaOptions NumericsVariant::sdpa(std::int64_t head_dim) const {
  ops::SdpaOptions o;
  o.form = attention;
  o.core = core;
  o.kernels = product.kernels;
  o.flash_steps = flash_steps;
  o.key_tile = key_tile;
  o.p_bf16 = head_dim <= 64 ? p_bf16_narrow_heads : p_bf16_wide_heads;
  return o;
}

ops::FfnOptions NumericsVariant::ffn(std::int64_t hidden) const {
  ops::FfnOptions o;
  o.schedule = ffn_schedule;
  o.up_bias = ffn_up_bias;
  o.hidden_tile = std::min(ffn_hidden_tile, hidden);
  o.product = product;
  return o;
}

const NumericsVariant& numerics_variant(std::string_view name) {
  for (const auto& v : variants())
    if (v.name == name) return v;
  if (name.starts_with("math-to-flash-"))
    for (const auto& v : step_variants())
      if (v.name == name) return v;
  std::string known;
  for (const auto& v : variants()) known += (known.empty() ? "" : ", ") + v.name;
  throw Error("unknown numerics variant '" + std::string(name) + "' (known: " + known + "; math-to-flash-1 … " +
              std::to_string(official::kMathToFlashSteps - 1) + ")");
}

const NumericsVariant& math_to_flash_variant(int steps) {
  if (steps < 1 || steps >= official::kMathToFlashSteps)
    throw Error("math-to-flash: step " + std::to_string(steps) + " (1 to " + std::to_string(official::kMathToFlashSteps - 1) +
                "; 0 is official-h200, " + std::to_string(official::kMathToFlashSteps) + " official-h200-flash)");
  return step_variants()[std::size_t(steps - 1)];
}

std::vector<std::string> numerics_variant_names() {
  std::vector<std::string> n;
  for (const auto& v : variants()) n.push_back(v.name);
  return n;
}

}  // namespace psi::model
