#pragma once
// Model-level timestep conditioning (spec §5.1 steps 3, 4, 7): the sinusoidal embedding, and
// what the AdaLayerNormSingle MLP (forward_structure.h's adaln) turns a scaled sigma into.
#include <vector>

#include "engine/official/nv_trig.h"
#include "engine/tensor.h"

namespace psi::pipeline {

// [cos(arg_0..127), sin(arg_0..127)] with e_i = expf(f32(f32(-ln 10000) * i) / 128) and
// arg_i = f32(tau * e_i); 256 float32 values. expf, cosf and sinf are the C library's (host)
// or libdevice's (cuda: nv_expf.h, nv_trig.h), as the official run evaluated them on the GPU.
std::vector<float> timestep_sinusoid(float tau, official::F32Math math = official::F32Math::host);
// The same in real arithmetic: e_i = exp(−ln 10000 · i / 128), arg_i = tau · e_i, in double.
std::vector<double> timestep_sinusoid(double tau);

template <class E>
struct AdaLnOutOf {
  Tensor<E> embedded;  // [1, D]: linear_2 output (used by the output head)
  Tensor<E> mod;       // [1, k*D]: linear(silu(embedded)) (the block's timestep tensor)
};

}  // namespace psi::pipeline
