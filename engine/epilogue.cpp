#include "engine/epilogue.h"

namespace psi {

void finish_linear(const float* acc, const Bf16* bias, BiasRule rule, Bf16* out, std::int64_t n) {
  if (!bias) {
    for (std::int64_t j = 0; j < n; ++j) out[j] = bf16_rne(acc[j]);
    return;
  }
  if (rule == BiasRule::fused_f32) {
    for (std::int64_t j = 0; j < n; ++j) out[j] = bf16_rne(acc[j] + bias[j].to_float());
  } else {
    for (std::int64_t j = 0; j < n; ++j) out[j] = bf16_rne(bf(acc[j]) + bias[j].to_float());
  }
}

}  // namespace psi
