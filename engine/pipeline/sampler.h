#pragma once
// The distilled pipeline's latent updates (spec §5.2, §6.3, §6.4), elementwise on patchified
// BF16 latents [1, N, C]. Scalar coefficients are float32 (the pipeline's sigmas are a float32
// tensor), every tensor op is one float32 operation in the order written, BF16 where the
// official loop casts. Each has a float64 overload: the same formula in double with no BF16
// write, for the float64 reference trajectory (trajectory_f64.h).
#include "engine/tensor.h"

namespace psi::pipeline {

// X0Model: x0 = bf( f32(latent) - f32(v) * sigma ).
Bf16Tensor to_denoised(const Bf16Tensor& latent, const Bf16Tensor& velocity, float sigma);
F64Tensor to_denoised(const F64Tensor& latent, const F64Tensor& velocity, double sigma);

// Deterministic Euler (stage 2): v = bf((f32(x) - f32(x0)) / sigma);
// x' = bf(f32(x) + f32(v) * (sigma_next - sigma)).
Bf16Tensor euler_step(const Bf16Tensor& x, const Bf16Tensor& x0, float sigma, float sigma_next);
F64Tensor euler_step(const F64Tensor& x, const F64Tensor& x0, double sigma, double sigma_next);

// Ancestral Euler, eta = 1, s_noise = 1 (stage 1 of LTX-2.5). `noise` is the step's fresh noise
// (unused, and may be empty, on the terminal step sigma_next = 0, where the state becomes x0).
Bf16Tensor ancestral_step(const Bf16Tensor& x, const Bf16Tensor& x0, float sigma, float sigma_next,
                          const Bf16Tensor& noise);
F64Tensor ancestral_step(const F64Tensor& x, const F64Tensor& x0, double sigma, double sigma_next,
                         const F64Tensor& noise);

// The official noiser: bf( lerp(clean, noise, scale) ) with PyTorch's lerp formula
// (a + w(b - a) for |w| < 0.5, else b - (b - a)(1 - w)), all tokens generated (mask 1).
Bf16Tensor noise_latent(const Bf16Tensor& clean, const Bf16Tensor& noise, float scale);
F64Tensor noise_latent(const F64Tensor& clean, const F64Tensor& noise, double scale);

// The recorded upsampler stand-in: the patchified video latent [1, F*H*W, C] seen as
// [C, F, H, W], each H and W cell repeated twice (nearest neighbour), patchified back to
// [1, F*2H*2W, C].
Bf16Tensor upsample_nearest2x(const Bf16Tensor& latent, std::int64_t frames, std::int64_t height,
                              std::int64_t width);
F64Tensor upsample_nearest2x(const F64Tensor& latent, std::int64_t frames, std::int64_t height,
                             std::int64_t width);

}  // namespace psi::pipeline
