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
// docs/official-kernels.md): ss in the order of h200_sum_of_squares, ms = ss / N (IEEE
// division), rstd = rsqrt_approx(ms + eps) (MUFU.RSQ, nv_rsqrt.h), y as above.
//
// LayerNorm without affine (the model's output head, spec §5.2), two passes:
//   mean = Σ x / N, var = Σ (x - mean)² / N (both in the reduce.h order), rstd as above,
//   y = bf( (x - mean) · rstd ).
// With NormKernel::h200 it is the same vectorized kernel with rms_norm = false: Welford
// statistics in the thread and warp order of h200_layer_norm_stats, rstd = rsqrt_approx(var +
// eps), y = bf( rstd · (x − mean) ).
#include <cstdint>

#include "engine/ops/matrix.h"

namespace psi::ops {

inline constexpr float kNormEps = 1e-6f;

// The RMS norm's arithmetic: psi's (reduce.h order, 1/sqrt) or the official kernel's on the H200.
enum class NormKernel { psi_f32, h200 };

// Σ x² of one row as the official vectorized kernel sums it: 128 threads (32 lanes × 4 warps),
// thread t owning the 4-element groups t, t + 128, t + 256, … and adding their squares in
// element order from +0; each warp's lanes combined by the shuffle-down tree (offsets 16, 8,
// 4, 2, 1, lane l adding lane l + offset), then the four warp sums as (w0 + w2) + (w1 + w3).
// n must be a multiple of 4 (the kernel's condition; otherwise psi::Error).
float h200_sum_of_squares(const Bf16* x, std::int64_t n);

void rms_norm(CBf16Mat x, const Bf16* weight, float eps, Bf16Mat y, NormKernel kernel = NormKernel::psi_f32);
// The partitioned form: columns in tiles of `tile` (the last may be shorter).
void rms_norm_tiled(CBf16Mat x, const Bf16* weight, float eps, std::int64_t tile, Bf16Mat y);

// The mean and variance of one row as the official vectorized LayerNorm kernel forms them: the
// threads and vectors of h200_sum_of_squares; per thread cuWelfordOnlineSum over its elements in
// order (delta = x − mean, count + 1, mean += delta · (1/count), sigma2 += delta · (x − mean),
// each mul-add one FMA as nvcc contracts it); cuWelfordCombine(own, partner) along the same
// shuffle-down tree and warp halving (coef = 1/count, mean = nA·mean_A + nB·mean_B, sigma2 =
// sigma2_A + sigma2_B + delta²·count_A·nB, A the partner, each final mul-add one FMA); var =
// sigma2 / N. n must be a multiple of 4.
struct LayerNormStats {
  float mean, var;
};
LayerNormStats h200_layer_norm_stats(const Bf16* x, std::int64_t n);

void layer_norm(CBf16Mat x, float eps, Bf16Mat y, NormKernel kernel = NormKernel::psi_f32);

Bf16Tensor rms_norm(const Bf16Tensor& x, const Bf16Tensor* weight, float eps = kNormEps,
                    NormKernel kernel = NormKernel::psi_f32);

}  // namespace psi::ops
