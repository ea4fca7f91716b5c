#pragma once
// Row norms with float32 statistics and one BF16 write.
//
// RMS norm (torch.nn.functional.rms_norm / nn.RMSNorm on the fused path, spec §3.2):
//   ss   = Σ f32(x)²   over the whole row, in the order of reduce.h (squares of BF16 are exact)
//   rstd = 1 / sqrt(ss / N + eps)        (float32: divide, add eps as float32, sqrt, divide)
//   y    = bf( f32(x) · rstd )            weightless
//   y    = bf( (f32(x) · rstd) · f32(w) ) with a learned weight (single rounding)
// The tiled form cuts each row into column tiles visited in order; its sum of squares is the
// same ordered sum (one global statistic per row), so it is bitwise equal to the untiled form.
//
// LayerNorm without affine (the model's output head, spec §5.2), two passes:
//   mean = Σ x / N, var = Σ (x - mean)² / N (both in the reduce.h order), rstd as above,
//   y = bf( (x - mean) · rstd ).
#include <cstdint>

#include "engine/ops/matrix.h"

namespace psi::ops {

inline constexpr float kNormEps = 1e-6f;

void rms_norm(CBf16Mat x, const Bf16* weight, float eps, Bf16Mat y);
// The partitioned form: columns in tiles of `tile` (the last may be shorter).
void rms_norm_tiled(CBf16Mat x, const Bf16* weight, float eps, std::int64_t tile, Bf16Mat y);

void layer_norm(CBf16Mat x, float eps, Bf16Mat y);

Bf16Tensor rms_norm(const Bf16Tensor& x, const Bf16Tensor* weight, float eps = kNormEps);

}  // namespace psi::ops
