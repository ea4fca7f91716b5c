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
// With NormKernel::h200 the RMS norm is PyTorch 2.11's CUDA kernel as the H200 runs it
// (layer_norm_kernel.cu, vectorized_layer_norm_kernel with rms_norm = true, the path
// F.rms_norm / nn.RMSNorm take for contiguous BF16 rows of a multiple of 4; see
// docs/official-kernels.md): ss in the order of official::h200_sum_of_squares, ms = ss / N (IEEE
// division), rstd = official::rsqrt_approx(ms + eps) (MUFU.RSQ, nv_rsqrt.h), y as above.
//
// LayerNorm without affine (the model's output head, spec §5.2), two passes:
//   mean = Σ x / N, var = Σ (x - mean)² / N (both in the reduce.h order), rstd as above,
//   y = bf( (x - mean) · rstd ).
// With NormKernel::h200 it is the same vectorized kernel with rms_norm = false: Welford
// statistics in the thread and warp order of official::h200_layer_norm_stats (norm_stats.h),
// rstd = official::rsqrt_approx(var + eps), y = bf( rstd · (x − mean) ).
#include <cstdint>

#include "engine/matrix.h"

namespace psi::ops {

inline constexpr float kNormEps = 1e-6f;

// The RMS norm's arithmetic: psi's (reduce.h order, 1/sqrt) or the official kernel's on the H200.
enum class NormKernel { psi_f32, h200 };

void rms_norm(CBf16Mat x, const Bf16* weight, float eps, Bf16Mat y, NormKernel kernel = NormKernel::psi_f32);
// The partitioned form: columns in tiles of `tile` (the last may be shorter).
void rms_norm_tiled(CBf16Mat x, const Bf16* weight, float eps, std::int64_t tile, Bf16Mat y);

void layer_norm(CBf16Mat x, float eps, Bf16Mat y, NormKernel kernel = NormKernel::psi_f32);

Bf16Tensor rms_norm(const Bf16Tensor& x, const Bf16Tensor* weight, float eps = kNormEps,
                    NormKernel kernel = NormKernel::psi_f32);

}  // namespace psi::ops
