#pragma once
// Numerics variants: the write-boundary and partitioning choices that distinguish the dense
// reference from the PSI forms, in one struct. Everything not listed here is the official
// operator order and BF16 write boundaries of the spec (§3, §9) in every variant.
//
// The variants themselves, their knobs in a table and what each stands for: the registry,
// make_variants() in variant.cpp, one entry each.
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

// What a variant stands for in the study's tables. A table looks a variant up by its role (or by
// the recorded path it claims), never by its name, so that a new variant is one registry entry.
enum class VariantRole {
  measured,        // a path the tables show and measure, with no part in their arithmetic
  psi_reference,   // dense: the path the trajectories' "to dense" distances are taken against
  paper_baseline,  // the paper's baseline PSI: Δ = modified − baseline
  paper_modified,  // the paper's modified PSI
};

struct NumericsVariant {
  std::string name;
  std::string summary;
  VariantRole role = VariantRole::measured;
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

// A registered variant (numerics_variants()) or one of the math-to-flash steps below; an unknown
// name is a psi::Error naming the known ones.
const NumericsVariant& numerics_variant(std::string_view name);
// The registry: every numerics variant in its row order (what --variant all means), not the
// steps. Every table, help text and test that lists variants enumerates this.
const std::vector<NumericsVariant>& numerics_variants();
// Their names, in that order.
std::vector<std::string> numerics_variant_names();
// The one variant of a role (psi_reference, paper_baseline, paper_modified); a psi::Error for
// measured, which many hold.
const NumericsVariant& variant_with_role(VariantRole role);
// The variant that claims the recorded official path `path` ("math", "flash"); a psi::Error
// when none does.
const NumericsVariant& variant_claiming(std::string_view path);
// "dense, official-h200, …": the registry's names for help texts and causes.
std::string numerics_variant_list();

// "math-to-flash-K", K = 1 … 6: official-h200 with every attention through the MATH core with
// FLASH's first K steps (official::sdpa_math_to_flash); official-h200 is step 0, official-h200-flash
// step 7. What psi run block-controls attributes the FLASH-vs-MATH differences with.
const NumericsVariant& math_to_flash_variant(int steps);

}  // namespace psi::model
