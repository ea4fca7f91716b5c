#pragma once
// SPLIT rotary position embedding (spec §4): cos/sin tables from token positions, and their
// application to q / k.
#include <cstdint>
#include <vector>

#include "engine/matrix.h"
#include "engine/official/nv_trig.h"
#include "engine/tensor.h"

namespace psi::ops {

// BF16 cos/sin tables, each [1, H, T, d/2] as the official code hands them to attention.
struct RopeTables {
  Bf16Tensor cos;
  Bf16Tensor sin;
  std::int64_t heads() const { return cos.dim(1); }
  std::int64_t tokens() const { return cos.dim(2); }
  std::int64_t half() const { return cos.dim(3); }
};

// The same tables in float64, for the float64 reference model (engine/model/block_f64.h).
struct RopeTablesF64 {
  F64Tensor cos;
  F64Tensor sin;
};

// The float64 frequency grid (§4.3): n = inner / (2P) entries
// ω_f = f32( θ^(f·(1/(n−1))) · π / 2 ), every step in float64, one rounding to float32.
std::vector<float> rope_frequencies_f64(std::int64_t inner, std::int64_t axes, double theta);

// Tables from positions [1, P, T, 2] (float32 [start, end) per axis), §4.2 and §4.4:
//   a = f32(2 · f32(f32((start + end) / 2) · f32(1 / max_pos[axis])) − 1)
//   (the official code divides by max_pos as a tensor-by-scalar division, which PyTorch runs
//   as a product with the float32 reciprocal; spec §4.2 writes a plain division)
//   angle[t][3f + axis] = f32(ω_f · a)   (axis fastest), cos/sin in float32 (`math`: the C
//   library's cosf / sinf, or CUDA libdevice's as the official run computed them, nv_trig.h),
//   padded at the front with cos 1 / sin 0 to inner/2 entries, cut into `heads` chunks, then
//   one BF16 rounding.
RopeTables rope_tables(const F32Tensor& positions, const std::vector<double>& max_pos,
                       std::int64_t inner, std::int64_t heads, double theta,
                       official::F32Math math = official::F32Math::host);

// The same tables in real arithmetic: every step above in double from the same float32
// positions (the grid not rounded to float32, a = 2·mid·(1/max_pos) − 1, cos/sin in double), and
// no BF16 rounding; same layout and padding.
RopeTablesF64 rope_tables_f64(const F32Tensor& positions, const std::vector<double>& max_pos,
                              std::int64_t inner, std::int64_t heads, double theta);

// Applies SPLIT RoPE in place to x [T, H·d] (§4.6): per head, x1 = [0, d/2), x2 = [d/2, d),
//   y1 = bf( bf(x1·cos) + (−sin)·x2 ),  y2 = bf( bf(x2·cos) + sin·x1 )
// with the products sin·x exact in float32 and one float32 sum before the BF16 write.
void apply_split_rope(Bf16Mat x, const RopeTables& t);

}  // namespace psi::ops
