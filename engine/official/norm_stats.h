#pragma once
// The row statistics of PyTorch 2.11's vectorized norm kernel (layer_norm_kernel.cu) as the
// H200 forms them, for NormKernel::h200 (engine/ops/norm.h): the sum of squares of the RMS norm
// and the Welford mean and variance of the LayerNorm.
#include <cstdint>

#include "engine/bf16.h"

namespace psi::official {

// Σ x² of one row as the official vectorized kernel sums it: 128 threads (32 lanes × 4 warps),
// thread t owning the 4-element groups t, t + 128, t + 256, … and adding their squares in
// element order from +0; each warp's lanes combined by the shuffle-down tree (offsets 16, 8,
// 4, 2, 1, lane l adding lane l + offset), then the four warp sums as (w0 + w2) + (w1 + w3).
// n must be a multiple of 4 (the kernel's condition; otherwise psi::Error).
float h200_sum_of_squares(const Bf16* x, std::int64_t n);

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

}  // namespace psi::official
