#pragma once
// The model-level forward (spec §5) written once, over an arithmetic A, so that the BF16 pipeline
// (Bf16Arith: the official operators, Linears in the variant's product) and the float64
// reference (F64Arith: Eigen products, double elsewhere, no BF16 write) share every fact of it:
// weight names, which AdaLN feeds what at which timestep, the keyframe marker, the output head.
// Internal to engine/pipeline (forward_bf16.cpp, forward_f64.cpp).
#include <cstdint>
#include <string>
#include <vector>

#include "engine/error.h"
#include "engine/model/block.h"
#include "engine/model/block_f64.h"
#include "engine/official/kernel_config.h"
#include "engine/official/op_observer.h"
#include "engine/ops/gemm.h"
#include "engine/ops/norm.h"
#include "engine/pipeline/forward.h"
#include "engine/pipeline/scalar.h"
#include "engine/pipeline/timestep.h"

namespace psi::pipeline {

constexpr std::int64_t kSinusoidWidth = 256;
constexpr std::int64_t kSinusoidHalf = kSinusoidWidth / 2;

// An arithmetic: its element type E (scalar.h), x·Wᵀ + b, SiLU, the output head's LayerNorm
// (mean-subtracting, no affine) and modulation x·(1 + scale) + shift, the timestep sinusoid and
// the RoPE tables.
struct Bf16Arith {
  using E = Bf16;
  ops::Product product = ops::Product::psi_f32;
  ops::NormKernel norm = ops::NormKernel::psi_f32;  // the output head's LayerNorm
  official::F32Math math = official::F32Math::host;           // the sinusoid's and RoPE tables' exp/cos/sin
  std::vector<float> sinusoid(float tau) const { return timestep_sinusoid(tau, math); }
  Bf16Tensor linear(const Bf16Tensor& x, const Bf16Tensor& w, const Bf16Tensor* bias) const;
  Bf16Tensor silu(const Bf16Tensor& x) const;
  Bf16Tensor layer_norm(const Bf16Tensor& x, float eps) const;
  Bf16Tensor modulate(const Bf16Tensor& x, const Bf16Tensor& scale, const Bf16Tensor& shift) const;
  model::BlockRope rope(const model::ModelConfig& c, const F32Tensor& video_positions,
                        const F32Tensor& audio_positions) const;
};

struct F64Arith {
  using E = double;
  F64Tensor linear(const F64Tensor& x, const Bf16Tensor& w, const Bf16Tensor* bias) const;
  F64Tensor silu(const F64Tensor& x) const;
  F64Tensor layer_norm(const F64Tensor& x, float eps) const;
  F64Tensor modulate(const F64Tensor& x, const F64Tensor& scale, const F64Tensor& shift) const;
  std::vector<double> sinusoid(double tau) const { return timestep_sinusoid(tau); }
  model::BlockRopeOf<ops::RopeTablesF64> rope(const model::ModelConfig& c, const F32Tensor& video_positions,
                                              const F32Tensor& audio_positions) const;
};

inline model::LinearWeights load_linear(model::TensorSource& w, const std::string& name, std::int64_t out,
                                        std::int64_t in) {
  return {w.load(name + ".weight", {out, in}), w.load(name + ".bias", {out})};
}

// AdaLayerNormSingle: the sinusoid stored as E, linear_1, SiLU,
// linear_2 (= embedded), SiLU, linear. `tokens`: the rows the official model runs (one per token
// for per-token timesteps, all equal; psi computes one), which the kernel choice sees.
template <class A>
AdaLnOutOf<typename A::E> adaln(const A& a, model::TensorSource& weights, const std::string& prefix,
                                std::int64_t dim, std::int64_t rows, typename Scalar<typename A::E>::Real tau,
                                std::int64_t tokens) {
  using E = typename A::E;
  const official::ProductSite site(prefix);
  const official::RowsAsIf as_if(tokens);
  const auto l1 = load_linear(weights, prefix + ".emb.timestep_embedder.linear_1", dim, kSinusoidWidth);
  const auto l2 = load_linear(weights, prefix + ".emb.timestep_embedder.linear_2", dim, dim);
  const auto lin = load_linear(weights, prefix + ".linear", rows * dim, dim);
  const auto s = a.sinusoid(tau);
  Tensor<E> emb({1, kSinusoidWidth});
  for (std::int64_t i = 0; i < kSinusoidWidth; ++i) emb.data[i] = Scalar<E>::store(s[i]);
  Tensor<E> h;
  AdaLnOutOf<E> out;
  {
    const official::ProductSite at("linear_1");
    h = a.silu(a.linear(emb, l1.w, l1.bias()));
  }
  {
    const official::ProductSite at("linear_2");
    out.embedded = a.linear(h, l2.w, l2.bias());
  }
  const official::ProductSite at("linear");
  out.mod = a.linear(a.silu(out.embedded), lin.w, lin.bias());
  return out;
}

template <class E>
struct PreparedOf {
  Tensor<E> x;                              // [1, N, D]
  AdaLnOutOf<E> main;                       // embedded [1, D], mod [1, rows·D]
  decltype(BlockInputsOf<E>::video) stream;  // everything the blocks take, except RoPE (set by the caller)
};

// Spec §5.1 for one modality. `other_sigma` is the other modality's sigma (the A/V gate is
// conditioned on it).
template <class A>
PreparedOf<typename A::E> prepare(const A& a, const model::ModelConfig& c, model::TensorSource& w,
                                  const ModalityInputOf<typename A::E>& in, float other_sigma, bool video) {
  using E = typename A::E;
  using S = Scalar<E>;
  using R = typename S::Real;
  const std::string pre = video ? "" : "audio_";
  const std::int64_t d = video ? c.video_dim() : c.audio_dim();
  const std::int64_t channels = video ? c.in_channels : c.audio_in_channels;
  if (in.latent.shape.size() != 3 || in.latent.dim(2) != channels)
    throw Error(std::string(video ? "video" : "audio") + " latent " + shape_str(in.latent.shape) +
                " is not [1, N, " + std::to_string(channels) + "]");
  PreparedOf<E> p;
  const Bf16Tensor pw = w.load(pre + "patchify_proj.weight", {d, channels});
  const Bf16Tensor pb = w.load(pre + "patchify_proj.bias", {d});
  {
    const official::ProductSite site(pre + "patchify_proj");
    p.x = a.linear(in.latent, pw, &pb);
  }
  const std::int64_t tokens = in.latent.dim(1);

  if (video && c.features.keyframes_abs_pos_embedding) {
    // x = bf(x + bf(m·E)) with m = 1 on the first latent frame's tokens, 0 elsewhere; done
    // literally, since even a zero E turns -0 into +0.
    const Bf16Tensor e = w.load("keyframes_abs_pos_embedding", {1, d});
    const std::int64_t n = p.x.dim(1);
    for (std::int64_t t = 0; t < n; ++t) {
      const R m = t < in.first_frame_tokens ? R(1) : R(0);
      for (std::int64_t j = 0; j < d; ++j) {
        E& v = p.x.data[t * d + j];
        v = S::store(S::load(v) + S::cast(m * R(e.data[j].to_float())));
      }
    }
  }

  const R tau = R(in.sigma) * R(c.timestep_scale_multiplier);
  const std::int64_t rows = c.features.ada_rows();
  p.main = adaln(a, w, pre + "adaln_single", d, rows, tau, tokens);
  auto& s = p.stream;
  s.timesteps = p.main.mod;
  s.timesteps.shape = {1, 1, rows * d};
  s.context = in.context;
  if (c.features.cross_attention_adaln) {
    AdaLnOutOf<E> prompt = adaln(a, w, pre + "prompt_adaln_single", d, 2, tau, 1);
    s.prompt_timestep = prompt.mod;
    s.prompt_timestep.shape = {1, 1, 2 * d};
  }
  const std::string av = video ? "av_ca_video_scale_shift_adaln_single" : "av_ca_audio_scale_shift_adaln_single";
  s.cross_scale_shift_timestep = adaln(a, w, av, d, 4, tau, tokens).mod;
  s.cross_scale_shift_timestep.shape = {1, 1, 4 * d};
  const R gate_tau = (R(other_sigma) * R(c.timestep_scale_multiplier)) *
                     R(c.features.av_ca_timestep_scale_multiplier / c.timestep_scale_multiplier);
  const std::string gate = video ? "av_ca_a2v_gate_adaln_single" : "av_ca_v2a_gate_adaln_single";
  s.cross_gate_timestep = adaln(a, w, gate, d, 1, gate_tau, 1).mod;
  s.cross_gate_timestep.shape = {1, 1, d};
  return p;
}

// Spec §5.2 step 9: LayerNorm, modulation by the output table + embedded timestep, proj_out.
template <class A>
Tensor<typename A::E> output_head(const A& a, const model::ModelConfig& c, model::TensorSource& w,
                                  const Tensor<typename A::E>& x, const Tensor<typename A::E>& embedded, bool video) {
  using E = typename A::E;
  using S = Scalar<E>;
  using R = typename S::Real;
  const std::string pre = video ? "" : "audio_";
  const std::int64_t d = video ? c.video_dim() : c.audio_dim();
  const std::int64_t out_ch = video ? c.out_channels : c.audio_out_channels;
  const Bf16Tensor table = w.load(pre + "scale_shift_table", {2, d});
  Tensor<E> shift({1, d}), scale({1, d});
  for (std::int64_t j = 0; j < d; ++j) {
    shift.data[j] = S::store(R(table.data[j].to_float()) + S::load(embedded.data[j]));
    scale.data[j] = S::store(R(table.data[d + j].to_float()) + S::load(embedded.data[j]));
  }
  const Tensor<E> y = a.modulate(a.layer_norm(x, c.norm_eps), scale, shift);
  const Bf16Tensor ow = w.load(pre + "proj_out.weight", {out_ch, d});
  const Bf16Tensor ob = w.load(pre + "proj_out.bias", {out_ch});
  const official::ProductSite site(pre + "proj_out");
  return a.linear(y, ow, &ob);
}

// Spec §5.1: everything the first block takes, and the embedded timesteps of the output heads.
template <class A>
PreparedInputsOf<typename A::E> prepare_model_inputs(const A& a, const model::ModelConfig& c,
                                                     model::TensorSource& weights,
                                                     const ModalityInputOf<typename A::E>& video,
                                                     const ModalityInputOf<typename A::E>& audio) {
  PreparedOf<typename A::E> v = prepare(a, c, weights, video, audio.sigma, true);
  PreparedOf<typename A::E> au = prepare(a, c, weights, audio, video.sigma, false);
  auto rope = a.rope(c, video.positions, audio.positions);
  PreparedInputsOf<typename A::E> out;
  auto& in = out.blocks;
  in.video = std::move(v.stream);
  in.audio = std::move(au.stream);
  in.video.pe = std::move(rope.video);
  in.video.cross_pe = std::move(rope.video_cross);
  in.audio.pe = std::move(rope.audio);
  in.audio.cross_pe = std::move(rope.audio_cross);
  in.video.x = std::move(v.x);
  in.audio.x = std::move(au.x);
  out.video_embedded = std::move(v.main.embedded);
  out.audio_embedded = std::move(au.main.embedded);
  return out;
}

// The whole forward: inputs, the blocks in order (run_block(index, inputs) returns the block's
// probes; after_block(index, probes) sees them), the output heads.
template <class A, class RunBlock, class AfterBlock>
ModelOutputOf<typename A::E> forward(const A& a, const model::ModelConfig& c, model::TensorSource& weights,
                                     const ModalityInputOf<typename A::E>& video,
                                     const ModalityInputOf<typename A::E>& audio, const RunBlock& run_block,
                                     const AfterBlock& after_block) {
  PreparedInputsOf<typename A::E> p = prepare_model_inputs(a, c, weights, video, audio);
  auto& in = p.blocks;
  for (int b = 0; b < int(c.layers); ++b) {
    const auto probes = [&] {
      const official::BlockScope scope(b);
      return run_block(b, in);
    }();
    in.video.x = probes.video_out;
    in.audio.x = probes.audio_out;
    after_block(b, probes);
  }
  ModelOutputOf<typename A::E> out;
  out.video_velocity = output_head(a, c, weights, in.video.x, p.video_embedded, true);
  out.audio_velocity = output_head(a, c, weights, in.audio.x, p.audio_embedded, false);
  return out;
}

}  // namespace psi::pipeline
