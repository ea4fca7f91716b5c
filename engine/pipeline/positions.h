#pragma once
// Token positions of the official latent tools (spec §4.1), in float32, [start, end) per axis:
// video [1, 3, F·H·W, 2] (time in seconds, height and width in pixels; f-major token order),
// audio [1, 1, N, 2] (seconds). psi computes them on the CPU; the recordings' GPU positions
// differ from this recipe by one float32 ULP in some elements (reference README), which is
// why probes of recorded blocks use the recorded positions.
#include <cstdint>

#include "engine/tensor.h"

namespace psi::pipeline {

F32Tensor video_positions(std::int64_t frames, std::int64_t height, std::int64_t width, float fps);
F32Tensor audio_positions(std::int64_t tokens);

// The time axis [1, 1, N, 2] of a positions tensor: what the cross-modal RoPE uses (§5.1 step 7).
F32Tensor time_axis(const F32Tensor& positions);

}  // namespace psi::pipeline
