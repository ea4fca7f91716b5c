#include "engine/pipeline/timestep.h"

#include <cmath>

#include "engine/ops/activation.h"
#include "engine/ops/gemm.h"

namespace psi::pipeline {

namespace {

constexpr std::int64_t kSinusoidWidth = 256;
constexpr std::int64_t kHalf = kSinusoidWidth / 2;

model::LinearWeights load_linear(model::WeightSource& w, const std::string& name, std::int64_t out,
                                 std::int64_t in) {
  return {w.load(name + ".weight", {out, in}), w.load(name + ".bias", {out})};
}

Bf16Tensor silu(const Bf16Tensor& x) {
  Bf16Tensor y(x.shape);
  ops::silu(x.ptr(), y.ptr(), x.numel());
  return y;
}

}  // namespace

std::vector<float> timestep_sinusoid(float tau) {
  // Python's -math.log(10000) rounded to float32, times i in float32, over half_dim, expf.
  const float neg_log_period = float(-std::log(10000.0));
  std::vector<float> out(kSinusoidWidth);
  for (std::int64_t i = 0; i < kHalf; ++i) {
    const float exponent = (neg_log_period * float(i)) / float(kHalf);
    const float arg = tau * std::exp(exponent);
    out[i] = std::cos(arg);
    out[kHalf + i] = std::sin(arg);
  }
  return out;
}

AdaLnOut adaln_single(model::WeightSource& weights, const std::string& prefix, std::int64_t dim,
                      std::int64_t rows, float tau, ops::Product product) {
  const auto l1 = load_linear(weights, prefix + ".emb.timestep_embedder.linear_1", dim, kSinusoidWidth);
  const auto l2 = load_linear(weights, prefix + ".emb.timestep_embedder.linear_2", dim, dim);
  const auto lin = load_linear(weights, prefix + ".linear", rows * dim, dim);
  const std::vector<float> s = timestep_sinusoid(tau);
  Bf16Tensor emb({1, kSinusoidWidth});
  for (std::int64_t i = 0; i < kSinusoidWidth; ++i) emb.data[i] = bf16_rne(s[i]);
  Bf16Tensor h = silu(ops::linear(emb, l1.w, l1.bias(), ops::BiasRule::fused_f32, product));
  AdaLnOut out;
  out.embedded = ops::linear(h, l2.w, l2.bias(), ops::BiasRule::fused_f32, product);
  out.mod = ops::linear(silu(out.embedded), lin.w, lin.bias(), ops::BiasRule::fused_f32, product);
  return out;
}

}  // namespace psi::pipeline
