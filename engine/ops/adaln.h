#pragma once
// AdaLN modulation and gated residual adds with the spec's BF16 write boundaries (§3.2, §3.3).
// Modulation vectors have either one row (a per-batch timestep, broadcast over tokens) or one
// row per token.
#include <cstdint>

#include "engine/matrix.h"
#include "engine/ops/norm.h"
#include "engine/tensor.h"

namespace psi::ops {

// AdaLN value extraction: value = bf(T[row] + S[:, row·D : (row+1)·D]). T is the block table
// [R, D]; S is [T_s, k·D] (T_s tokens, or 1) viewed as k rows of width D. Returns [T_s, D].
Bf16Tensor ada_value(const Bf16Tensor& table, const Bf16Tensor& timestep, int row);
// The same with another timestep row: bf(T[row] + S[:, ts_row·D : (ts_row+1)·D]) (the A/V gate
// adds table row 4 to the single-row gate timestep).
Bf16Tensor ada_value(const Bf16Tensor& table, int row, const Bf16Tensor& timestep, int ts_row);

// bf(1 + v), the scale factor every modulation applies.
Bf16Tensor one_plus(const Bf16Tensor& v);

// y = bf( bf(x · one_plus_scale) + shift ), x [N, D]; one_plus_scale and shift [1 or N, D].
void modulate(CBf16Mat x, CBf16Mat one_plus_scale, CBf16Mat shift, Bf16Mat y);
Bf16Tensor modulate(const Bf16Tensor& x, const Bf16Tensor& scale, const Bf16Tensor& shift);

// ada_zero(x; scale, shift) = bf( bf( rms(x) · bf(1 + scale) ) + shift ), rms weightless.
Bf16Tensor ada_zero(const Bf16Tensor& x, const Bf16Tensor& scale, const Bf16Tensor& shift,
                    float eps, NormKernel norm = NormKernel::psi_f32);

// Gated residual: x' = bf( x + bf(y · g) ), g [1 or N, D]. (The official A/V path also
// multiplies by a perturbation mask that is all ones; bf(z · 1) = z, so it is omitted.)
Bf16Tensor gated_residual(const Bf16Tensor& x, const Bf16Tensor& y, const Bf16Tensor& g);
// Ungated residual (LTX-2 text cross-attention): bf(x + y).
Bf16Tensor residual(const Bf16Tensor& x, const Bf16Tensor& y);

// post_sa: x' = gated_residual(x, y, g) and n = rms(x') (weightless).
struct PostSa {
  Bf16Tensor x;
  Bf16Tensor normed;
};
PostSa post_sa(const Bf16Tensor& x, const Bf16Tensor& y, const Bf16Tensor& g, float eps,
               NormKernel norm = NormKernel::psi_f32);

}  // namespace psi::ops
