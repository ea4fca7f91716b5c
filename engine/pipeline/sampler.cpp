#include "engine/pipeline/sampler.h"

#include <algorithm>
#include <cmath>

#include "engine/error.h"

namespace psi::pipeline {

namespace {
void same_shape(const Bf16Tensor& a, const Bf16Tensor& b, const char* what) {
  if (a.shape != b.shape)
    throw Error(std::string(what) + ": shapes " + shape_str(a.shape) + " and " + shape_str(b.shape) + " differ");
}
float lerp_f32(float a, float b, float w) {
  return std::fabs(w) < 0.5f ? a + w * (b - a) : b - (b - a) * (1.0f - w);
}
}  // namespace

Bf16Tensor to_denoised(const Bf16Tensor& latent, const Bf16Tensor& velocity, float sigma) {
  same_shape(latent, velocity, "to_denoised");
  Bf16Tensor out(latent.shape);
  for (std::int64_t i = 0; i < out.numel(); ++i) {
    const float vs = velocity.data[i].to_float() * sigma;
    out.data[i] = bf16_rne(latent.data[i].to_float() - vs);
  }
  return out;
}

Bf16Tensor euler_step(const Bf16Tensor& x, const Bf16Tensor& x0, float sigma, float sigma_next) {
  same_shape(x, x0, "euler_step");
  const float dt = sigma_next - sigma;
  Bf16Tensor out(x.shape);
  for (std::int64_t i = 0; i < out.numel(); ++i) {
    const float v = bf((x.data[i].to_float() - x0.data[i].to_float()) / sigma);
    const float step = v * dt;
    out.data[i] = bf16_rne(x.data[i].to_float() + step);
  }
  return out;
}

Bf16Tensor ancestral_step(const Bf16Tensor& x, const Bf16Tensor& x0, float sigma, float sigma_next,
                          const Bf16Tensor& noise) {
  same_shape(x, x0, "ancestral_step");
  if (sigma_next == 0.0f) return x0;
  same_shape(x, noise, "ancestral_step noise");
  const float eta = 1.0f;
  const float ratio = 1.0f + (sigma_next / sigma - 1.0f) * eta;
  const float sigma_down = sigma_next * ratio;
  const float r = sigma_down / sigma;
  const float alpha_next = 1.0f - sigma_next;
  const float alpha_down = 1.0f - sigma_down;
  const float a2 = alpha_next * alpha_next, d2 = alpha_down * alpha_down;
  const float var = sigma_next * sigma_next - (sigma_down * sigma_down) * a2 / d2;
  const float c = std::sqrt(std::max(var, 0.0f));
  const float scale = alpha_next / alpha_down;
  Bf16Tensor out(x.shape);
  for (std::int64_t i = 0; i < out.numel(); ++i) {
    const float xd = r * x.data[i].to_float() + (1.0f - r) * x0.data[i].to_float();
    out.data[i] = bf16_rne(scale * xd + noise.data[i].to_float() * c);
  }
  return out;
}

Bf16Tensor noise_latent(const Bf16Tensor& clean, const Bf16Tensor& noise, float scale) {
  same_shape(clean, noise, "noise_latent");
  Bf16Tensor out(clean.shape);
  for (std::int64_t i = 0; i < out.numel(); ++i)
    out.data[i] = bf16_rne(lerp_f32(clean.data[i].to_float(), noise.data[i].to_float(), scale));
  return out;
}

Bf16Tensor upsample_nearest2x(const Bf16Tensor& latent, std::int64_t frames, std::int64_t height,
                              std::int64_t width) {
  if (latent.shape.size() != 3 || latent.dim(1) != frames * height * width)
    throw Error("upsample_nearest2x: latent " + shape_str(latent.shape) + " is not [1, " +
                std::to_string(frames * height * width) + ", C]");
  const std::int64_t c = latent.dim(2), h2 = 2 * height, w2 = 2 * width;
  Bf16Tensor out({1, frames * h2 * w2, c});
  for (std::int64_t f = 0; f < frames; ++f)
    for (std::int64_t r = 0; r < h2; ++r)
      for (std::int64_t q = 0; q < w2; ++q) {
        const std::int64_t src = (f * height + r / 2) * width + q / 2;
        const std::int64_t dst = (f * h2 + r) * w2 + q;
        std::copy_n(latent.data.begin() + src * c, c, out.data.begin() + dst * c);
      }
  return out;
}

}  // namespace psi::pipeline
