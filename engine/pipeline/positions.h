#pragma once
// Token positions of the official latent tools (spec §4.1), in float32, [start, end) per axis:
// video [1, 3, F·H·W, 2] (time in seconds, height and width in pixels; f-major token order),
// audio [1, 1, N, 2] (seconds). The official code divides the time axis on the GPU as
// tensor-by-scalar divisions, which PyTorch runs as products with the divisor's float32
// reciprocal (F32Math::cuda: x · f32(1/fps), video; f32(x · 160) · f32(1/16000), audio): that
// reproduces every recorded position of block_small, where the IEEE divisions of F32Math::host
// (psi's CPU recipe) differ by one float32 ULP in 462 of 3,696 video and 140 of 252 audio values.
#include <cstdint>

#include "engine/official/nv_trig.h"
#include "engine/tensor.h"

namespace psi::pipeline {

F32Tensor video_positions(std::int64_t frames, std::int64_t height, std::int64_t width, float fps,
                          official::F32Math math = official::F32Math::host);
F32Tensor audio_positions(std::int64_t tokens, official::F32Math math = official::F32Math::host);

}  // namespace psi::pipeline
