#pragma once
// Model-level timestep conditioning (spec §5.1 steps 3, 4, 7): the sinusoidal embedding and
// the AdaLayerNormSingle MLP that turns a scaled sigma into block modulation rows.
#include <cstdint>
#include <string>
#include <vector>

#include "engine/model/weights.h"
#include "engine/official/nv_trig.h"
#include "engine/ops/gemm.h"
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
using AdaLnOut = AdaLnOutOf<Bf16>;

// AdaLayerNormSingle `prefix` (e.g. "adaln_single") on one scaled timestep tau: the sinusoid
// cast to BF16, linear_1, SiLU, linear_2 (= embedded), SiLU, linear. All rows of a plain T2V
// call share one sigma, so one row is computed and the blocks broadcast it.
// `dim` is the module's width D and `rows` its k (the linear maps D -> k·D); the three
// Linears in `product`'s arithmetic, with the kernel choice of the `tokens`-row products the
// official model runs (official::RowsAsIf).
AdaLnOut adaln_single(model::TensorSource& weights, const std::string& prefix, std::int64_t dim,
                      std::int64_t rows, float tau, ops::Product product = ops::Product::psi_f32,
                      std::int64_t tokens = 1);

}  // namespace psi::pipeline
