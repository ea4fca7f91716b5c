#include "engine/pipeline/positions.h"

#include <algorithm>

namespace psi::pipeline {

namespace {
// VAE scale factors of the video latent (time 8, height 32, width 32) and the audio latent
// (16 kHz, hop 160, downsample 4).
constexpr std::int64_t kTimeScale = 8, kSpatialScale = 32;
constexpr std::int64_t kAudioDownsample = 4;
constexpr float kHop = 160.0f, kSampleRate = 16000.0f;

// x / d in float32: an IEEE division, or PyTorch's CUDA tensor-by-scalar division.
float divide(float x, float d, official::F32Math math) { return math == official::F32Math::cuda ? x * (1.0f / d) : x / d; }
}  // namespace

F32Tensor video_positions(std::int64_t frames, std::int64_t height, std::int64_t width, float fps,
                          official::F32Math math) {
  const std::int64_t n = frames * height * width;
  F32Tensor p({1, 3, n, 2});
  auto at = [&](int axis, std::int64_t t, int side) -> float& { return p.data[(axis * n + t) * 2 + side]; };
  std::int64_t t = 0;
  for (std::int64_t f = 0; f < frames; ++f)
    for (std::int64_t r = 0; r < height; ++r)
      for (std::int64_t c = 0; c < width; ++c, ++t) {
        // Causal fix: the first latent frame covers one pixel frame.
        at(0, t, 0) = divide(float(std::max<std::int64_t>(0, kTimeScale * f - (kTimeScale - 1))), fps, math);
        at(0, t, 1) = divide(float(kTimeScale * f + 1), fps, math);
        at(1, t, 0) = float(kSpatialScale * r);
        at(1, t, 1) = float(kSpatialScale * r + kSpatialScale);
        at(2, t, 0) = float(kSpatialScale * c);
        at(2, t, 1) = float(kSpatialScale * c + kSpatialScale);
      }
  return p;
}

F32Tensor audio_positions(std::int64_t tokens, official::F32Math math) {
  F32Tensor p({1, 1, tokens, 2});
  for (std::int64_t i = 0; i < tokens; ++i) {
    const float start = float(std::max<std::int64_t>(0, kAudioDownsample * i + 1 - kAudioDownsample));
    const float end = float(kAudioDownsample * i + 1);
    p.data[2 * i] = divide(start * kHop, kSampleRate, math);
    p.data[2 * i + 1] = divide(end * kHop, kSampleRate, math);
  }
  return p;
}

}  // namespace psi::pipeline
