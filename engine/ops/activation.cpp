#include "engine/ops/activation.h"

#include <cmath>

namespace psi::ops {

namespace {
// Both constants are formed in double and rounded once to float, as PyTorch's constexprs are.
constexpr float kGeluBeta = float(1.41421356237309504880 * 1.12837916709551257390 * 0.5);
constexpr float kGeluKappa = float(0.044715);
}  // namespace

float gelu_tanh_f32(float x) {
  const float x_cube = (x * x) * x;
  const float inner = kGeluBeta * (x + kGeluKappa * x_cube);
  return (0.5f * x) * (1.0f + std::tanh(inner));
}

float sigmoid_f32(float x) { return 1.0f / (1.0f + std::exp(-x)); }

float silu_f32(float x) { return x / (1.0f + std::exp(-x)); }

void gelu_tanh(const Bf16* in, Bf16* out, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) out[i] = bf16_rne(gelu_tanh_f32(in[i].to_float()));
}

void sigmoid(const Bf16* in, Bf16* out, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) out[i] = bf16_rne(sigmoid_f32(in[i].to_float()));
}

void silu(const Bf16* in, Bf16* out, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) out[i] = bf16_rne(silu_f32(in[i].to_float()));
}

}  // namespace psi::ops
