#pragma once
// A float64 filter in front of the exact path. Almost every element of a projection lies far
// from a BF16 rounding boundary and needs no exact arithmetic: y = x·Wᵀ + b is computed in
// float64 by a plain GEMM (oracle/float64_gemm.h: Eigen's, per vector level; BF16 products are
// exact in float64), each element gets a proven bound on the float64 error, and where the
// interval [v - B, v + B] holds no BF16 rounding boundary (its two ends round to the same BF16),
// that BF16 is the correctly rounded value — rounding is monotonic, and the exact value lies in
// the interval. The rest go to the exact path
// (oracle/fixed_dot.h). The verdicts are the exact path's, element for element.
//
// The bound, for a sum of K exact products in any order (the GEMM's tiles and blocks are one,
// whatever the level; an FMA of an exact product rounds once, as the addition would):
// |fl(sum) - sum| <= gamma_(K-1) * sum_k |x_k w_k| <= (K-1) u / (1 - (K-1) u) * ||x|| ||w||
// (Cauchy-Schwarz; u = 2^-53), plus one rounding for the bias addition. The norms are float64
// sums of squares, themselves rounded: B = 2 K u ||x||^ ||w||^ + 4 u |v| covers both for every
// K the exact path accepts (K u < 2^-21), and the interval's ends are stepped one float64 ulp
// outward for the rounding of v -/+ B.
#include <cstdint>
#include <span>

#include "engine/tensor.h"

namespace psi::oracle {

struct CertifiedLinear {
  Bf16Tensor correct;                   // [row_end - row_begin, N]: every element's correctly rounded BF16
  std::int64_t decided_by_filter = 0;   // elements the float64 interval decided
  std::int64_t sent_exact = 0;          // elements the exact path decided
  double seconds_filter = 0, seconds_exact = 0;
};

// The same contract as correctly_rounded_linear (fixed_dot.h), bit for bit; operands with a
// NaN or Inf take the exact path whole (it names them).
CertifiedLinear certified_linear(std::span<const Bf16> x, std::span<const Bf16> w, std::span<const Bf16> b,
                                 std::int64_t K, std::int64_t row_begin, std::int64_t row_end, int threads);

}  // namespace psi::oracle
