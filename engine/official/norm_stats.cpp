#include "engine/official/norm_stats.h"

#include <cmath>
#include <string>

#include "engine/error.h"

namespace psi::official {

namespace {

// The official kernel's block: 32 lanes × 4 warps, 4 elements a vector load.
constexpr int kLanes32 = 32, kWarps = 4, kVector = 4;

// The vectorised kernels run only on rows of whole vectors.
void check_vector_width(std::int64_t n, const char* op) {
  if (n % kVector != 0)
    throw Error(std::string(op) + " (h200 kernel): row width " + std::to_string(n) +
                " is not a multiple of 4; PyTorch takes another kernel there, not modelled");
}

}  // namespace

float h200_sum_of_squares(const Bf16* x, std::int64_t n) {
  check_vector_width(n, "rms_norm");
  constexpr int threads = kLanes32 * kWarps;
  float sum[threads] = {};
  for (std::int64_t v = 0; v < n / kVector; ++v)
    for (int e = 0; e < kVector; ++e) {
      const float a = x[v * kVector + e].to_float();
      sum[v % threads] += a * a;  // exact square: the kernel's FMA gives the same bits
    }
  float warp[kWarps];
  for (int w = 0; w < kWarps; ++w) {
    float* l = sum + w * kLanes32;
    // Lane 0's value: lanes past the end never reach it, so they are left out.
    for (int offset = kLanes32 / 2; offset > 0; offset /= 2)
      for (int i = 0; i + offset < kLanes32; ++i) l[i] = l[i] + l[i + offset];
    warp[w] = l[0];
  }
  return (warp[0] + warp[2]) + (warp[1] + warp[3]);
}

namespace {

struct Welford {
  float mean = 0.0f, sigma2 = 0.0f, count = 0.0f;
};

// cuWelfordOnlineSum (rms_norm = false); the reciprocal is IEEE (no fast math), and the two
// mul-adds are taken as nvcc's FMA contraction forms them.
Welford welford_add(Welford w, float x) {
  const float delta = x - w.mean;
  const float count = w.count + 1.0f;
  const float mean = std::fma(delta, 1.0f / count, w.mean);
  return {mean, std::fma(delta, x - mean, w.sigma2), count};
}

// cuWelfordCombine(dataB = own, dataA = partner).
Welford welford_combine(Welford own, Welford partner) {
  const float delta = own.mean - partner.mean;
  const float count = partner.count + own.count;
  if (!(count > 0.0f)) return {};
  const float coef = 1.0f / count;
  const float nA = partner.count * coef, nB = own.count * coef;
  return {std::fma(nA, partner.mean, nB * own.mean),
          std::fma(delta * delta * partner.count, nB, partner.sigma2 + own.sigma2), count};
}

}  // namespace

LayerNormStats h200_layer_norm_stats(const Bf16* x, std::int64_t n) {
  check_vector_width(n, "layer_norm");
  constexpr int threads = kLanes32 * kWarps;
  Welford t[threads];
  for (std::int64_t v = 0; v < n / kVector; ++v)
    for (int e = 0; e < kVector; ++e) t[v % threads] = welford_add(t[v % threads], x[v * kVector + e].to_float());
  Welford warp[kWarps];
  for (int w = 0; w < kWarps; ++w) {
    Welford* l = t + w * kLanes32;
    for (int offset = kLanes32 / 2; offset > 0; offset /= 2)
      for (int i = 0; i + offset < kLanes32; ++i) l[i] = welford_combine(l[i], l[i + offset]);
    warp[w] = l[0];
  }
  // Shared-memory halving: the upper half of the warps hands its values to the lower half.
  for (int offset = kWarps / 2; offset > 0; offset /= 2)
    for (int w = 0; w < offset; ++w) warp[w] = welford_combine(warp[w], warp[w + offset]);
  return {warp[0].mean, warp[0].sigma2 / float(n)};
}

}  // namespace psi::official
