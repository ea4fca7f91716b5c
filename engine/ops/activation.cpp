#include "engine/ops/activation.h"

#include <array>
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

namespace {

// A BF16 -> BF16 activation has 65,536 inputs: its table, filled on first use by the float32
// formula itself, gives every element the formula's bits without a libm call per element
// (tanhf's expm1f was a twentieth of an official block's time).
template <float (*F)(float)>
const std::array<Bf16, 65536>& table_of() {
  static const std::array<Bf16, 65536> table = [] {
    std::array<Bf16, 65536> t;
    for (std::uint32_t b = 0; b < t.size(); ++b) t[b] = bf16_rne(F(Bf16::from_bits(std::uint16_t(b)).to_float()));
    return t;
  }();
  return table;
}

template <float (*F)(float)>
void apply(const Bf16* in, Bf16* out, std::int64_t n) {
  const auto& t = table_of<F>();
  for (std::int64_t i = 0; i < n; ++i) out[i] = t[in[i].bits];
}

}  // namespace

void gelu_tanh(const Bf16* in, Bf16* out, std::int64_t n) { apply<gelu_tanh_f32>(in, out, n); }

void sigmoid(const Bf16* in, Bf16* out, std::int64_t n) { apply<sigmoid_f32>(in, out, n); }

void silu(const Bf16* in, Bf16* out, std::int64_t n) { apply<silu_f32>(in, out, n); }

}  // namespace psi::ops
