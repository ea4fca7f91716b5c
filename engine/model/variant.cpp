#include "engine/model/variant.h"

#include <algorithm>

#include "engine/error.h"
#include "engine/official/math_to_flash.h"

namespace psi::model {

namespace {

// The registry. A variant's place here is its row order everywhere.
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
std::vector<NumericsVariant> make_variants() {
  NumericsVariant dense;
  dense.name = "dense";
  dense.summary = "official operator order and BF16 write boundaries on whole tensors, MATH attention";
  dense.role = VariantRole::psi_reference;

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
  official.role = VariantRole::measured;  // dense's copy is the reference's
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
  baseline.role = VariantRole::paper_baseline;

  NumericsVariant modified;
  modified.name = "modified";
  modified.summary = "paper's modified PSI: FFN up-projection bias in float32 before one BF16 write, "
                     "float32 P for 64-dim heads";
  modified.attention = ops::SoftmaxForm::online;
  modified.p_bf16_narrow_heads = false;
  modified.p_bf16_wide_heads = true;
  modified.ffn_schedule = ops::FfnSchedule::reuse;
  modified.ffn_up_bias = psi::BiasRule::fused_f32;
  modified.role = VariantRole::paper_modified;

  return {dense, official, flash, baseline, modified};
}

const std::vector<NumericsVariant>& step_variants() {
  static const std::vector<NumericsVariant> steps = [] {
    std::vector<NumericsVariant> s;
    for (int k = 1; k < official::kMathToFlashSteps; ++k) {
      NumericsVariant v = variant_claiming("math");
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
  for (const auto& v : numerics_variants())
    if (v.name == name) return v;
  if (name.starts_with("math-to-flash-"))
    for (const auto& v : step_variants())
      if (v.name == name) return v;
  throw Error("unknown numerics variant '" + std::string(name) + "' (known: " + numerics_variant_list() +
              "; math-to-flash-1 … " +
              std::to_string(official::kMathToFlashSteps - 1) + ")");
}

const NumericsVariant& math_to_flash_variant(int steps) {
  if (steps < 1 || steps >= official::kMathToFlashSteps)
    throw Error("math-to-flash: step " + std::to_string(steps) + " (1 to " + std::to_string(official::kMathToFlashSteps - 1) +
                "; 0 is official-h200, " + std::to_string(official::kMathToFlashSteps) + " official-h200-flash)");
  return step_variants()[std::size_t(steps - 1)];
}

const std::vector<NumericsVariant>& numerics_variants() {
  static const std::vector<NumericsVariant> v = make_variants();
  return v;
}

std::vector<std::string> numerics_variant_names() {
  std::vector<std::string> n;
  for (const auto& v : numerics_variants()) n.push_back(v.name);
  return n;
}

std::string numerics_variant_list() {
  std::string list;
  for (const auto& v : numerics_variants()) list += (list.empty() ? "" : ", ") + v.name;
  return list;
}

const NumericsVariant& variant_with_role(VariantRole role) {
  if (role == VariantRole::measured) throw Error("variant_with_role: many variants are measured paths");
  for (const auto& v : numerics_variants())
    if (v.role == role) return v;
  const char* name = role == VariantRole::psi_reference    ? "psi_reference"
                     : role == VariantRole::paper_baseline ? "paper_baseline"
                                                           : "paper_modified";
  throw Error(std::string("no numerics variant holds the role ") + name + " (registered: " + numerics_variant_list() + ")");
}

const NumericsVariant& variant_claiming(std::string_view path) {
  for (const auto& v : numerics_variants())
    if (v.claims == path) return v;
  throw Error("no numerics variant claims the recorded " + std::string(path) + " path (registered: " +
              numerics_variant_list() + ")");
}

}  // namespace psi::model
