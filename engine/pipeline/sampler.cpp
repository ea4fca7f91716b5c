#include "engine/pipeline/sampler.h"

#include <algorithm>
#include <cmath>

#include "engine/error.h"
#include "engine/pipeline/scalar.h"

namespace psi::pipeline {

namespace {

template <class E>
void same_shape(const Tensor<E>& a, const Tensor<E>& b, const char* what) {
  if (a.shape != b.shape)
    throw Error(std::string(what) + ": shapes " + shape_str(a.shape) + " and " + shape_str(b.shape) + " differ");
}

template <class R>
R lerp(R a, R b, R w) {
  return std::fabs(w) < R(0.5) ? a + w * (b - a) : b - (b - a) * (R(1) - w);
}

// Each step once, over the element type (scalar.h): BF16 with float32 coefficients, or double.
template <class E, class R = typename Scalar<E>::Real>
Tensor<E> denoised(const Tensor<E>& latent, const Tensor<E>& velocity, R sigma) {
  using S = Scalar<E>;
  same_shape(latent, velocity, "to_denoised");
  Tensor<E> out(latent.shape);
  for (std::int64_t i = 0; i < out.numel(); ++i) {
    const R vs = S::load(velocity.data[i]) * sigma;
    out.data[i] = S::store(S::load(latent.data[i]) - vs);
  }
  return out;
}

template <class E, class R = typename Scalar<E>::Real>
Tensor<E> euler(const Tensor<E>& x, const Tensor<E>& x0, R sigma, R sigma_next) {
  using S = Scalar<E>;
  same_shape(x, x0, "euler_step");
  const R dt = sigma_next - sigma;
  Tensor<E> out(x.shape);
  for (std::int64_t i = 0; i < out.numel(); ++i) {
    const R v = S::cast((S::load(x.data[i]) - S::load(x0.data[i])) / sigma);
    const R step = v * dt;
    out.data[i] = S::store(S::load(x.data[i]) + step);
  }
  return out;
}

template <class E, class R = typename Scalar<E>::Real>
Tensor<E> ancestral(const Tensor<E>& x, const Tensor<E>& x0, R sigma, R sigma_next, const Tensor<E>& noise) {
  using S = Scalar<E>;
  same_shape(x, x0, "ancestral_step");
  if (sigma_next == R(0)) return x0;
  same_shape(x, noise, "ancestral_step noise");
  const R eta = R(1);
  const R ratio = R(1) + (sigma_next / sigma - R(1)) * eta;
  const R sigma_down = sigma_next * ratio;
  const R r = sigma_down / sigma;
  const R alpha_next = R(1) - sigma_next;
  const R alpha_down = R(1) - sigma_down;
  const R a2 = alpha_next * alpha_next, d2 = alpha_down * alpha_down;
  const R var = sigma_next * sigma_next - (sigma_down * sigma_down) * a2 / d2;
  const R c = std::sqrt(std::max(var, R(0)));
  const R scale = alpha_next / alpha_down;
  Tensor<E> out(x.shape);
  for (std::int64_t i = 0; i < out.numel(); ++i) {
    const R xd = r * S::load(x.data[i]) + (R(1) - r) * S::load(x0.data[i]);
    out.data[i] = S::store(scale * xd + S::load(noise.data[i]) * c);
  }
  return out;
}

template <class E, class R = typename Scalar<E>::Real>
Tensor<E> noised(const Tensor<E>& clean, const Tensor<E>& noise, R scale) {
  using S = Scalar<E>;
  same_shape(clean, noise, "noise_latent");
  Tensor<E> out(clean.shape);
  for (std::int64_t i = 0; i < out.numel(); ++i)
    out.data[i] = S::store(lerp(S::load(clean.data[i]), S::load(noise.data[i]), scale));
  return out;
}

template <class E>
Tensor<E> upsample(const Tensor<E>& latent, std::int64_t frames, std::int64_t height, std::int64_t width) {
  if (latent.shape.size() != 3 || latent.dim(1) != frames * height * width)
    throw Error("upsample_nearest2x: latent " + shape_str(latent.shape) + " is not [1, " +
                std::to_string(frames * height * width) + ", C]");
  const std::int64_t c = latent.dim(2), h2 = 2 * height, w2 = 2 * width;
  Tensor<E> out({1, frames * h2 * w2, c});
  for (std::int64_t f = 0; f < frames; ++f)
    for (std::int64_t r = 0; r < h2; ++r)
      for (std::int64_t q = 0; q < w2; ++q) {
        const std::int64_t src = (f * height + r / 2) * width + q / 2;
        const std::int64_t dst = (f * h2 + r) * w2 + q;
        std::copy_n(latent.data.begin() + src * c, c, out.data.begin() + dst * c);
      }
  return out;
}

}  // namespace

Bf16Tensor to_denoised(const Bf16Tensor& latent, const Bf16Tensor& velocity, float sigma) {
  return denoised(latent, velocity, sigma);
}
F64Tensor to_denoised(const F64Tensor& latent, const F64Tensor& velocity, double sigma) {
  return denoised(latent, velocity, sigma);
}

Bf16Tensor euler_step(const Bf16Tensor& x, const Bf16Tensor& x0, float sigma, float sigma_next) {
  return euler(x, x0, sigma, sigma_next);
}
F64Tensor euler_step(const F64Tensor& x, const F64Tensor& x0, double sigma, double sigma_next) {
  return euler(x, x0, sigma, sigma_next);
}

Bf16Tensor ancestral_step(const Bf16Tensor& x, const Bf16Tensor& x0, float sigma, float sigma_next,
                          const Bf16Tensor& noise) {
  return ancestral(x, x0, sigma, sigma_next, noise);
}
F64Tensor ancestral_step(const F64Tensor& x, const F64Tensor& x0, double sigma, double sigma_next,
                         const F64Tensor& noise) {
  return ancestral(x, x0, sigma, sigma_next, noise);
}

Bf16Tensor noise_latent(const Bf16Tensor& clean, const Bf16Tensor& noise, float scale) {
  return noised(clean, noise, scale);
}
F64Tensor noise_latent(const F64Tensor& clean, const F64Tensor& noise, double scale) {
  return noised(clean, noise, scale);
}

Bf16Tensor upsample_nearest2x(const Bf16Tensor& latent, std::int64_t frames, std::int64_t height,
                              std::int64_t width) {
  return upsample(latent, frames, height, width);
}
F64Tensor upsample_nearest2x(const F64Tensor& latent, std::int64_t frames, std::int64_t height,
                             std::int64_t width) {
  return upsample(latent, frames, height, width);
}

}  // namespace psi::pipeline
