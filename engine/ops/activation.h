#pragma once
// Pointwise activations: float32 evaluation of a BF16 input, one BF16 write (spec §0).
// The float32 formulas follow PyTorch's CUDA kernels operation by operation:
//   gelu_tanh(x) = (0.5·x) · (1 + tanh(β·(x + κ·((x·x)·x))))   β = f32(√2·(2/√π)·0.5), κ = f32(0.044715)
//   sigmoid(x)   = 1 / (1 + exp(−x))
//   silu(x)      = x / (1 + exp(−x))
// tanh and exp are the C library's float functions (std::tanh, std::exp). CUDA's tanhf/expf
// can differ from them by an ulp in float32 and nvcc may contract the polynomial into FMAs;
// those are measured sources of difference against the recordings, not hidden here.
#include <cstdint>

#include "engine/bf16.h"

namespace psi::ops {

float gelu_tanh_f32(float x);
float sigmoid_f32(float x);
float silu_f32(float x);

// out[i] = bf(f(in[i])); in and out may alias.
void gelu_tanh(const Bf16* in, Bf16* out, std::int64_t n);
void sigmoid(const Bf16* in, Bf16* out, std::int64_t n);
void silu(const Bf16* in, Bf16* out, std::int64_t n);

}  // namespace psi::ops
