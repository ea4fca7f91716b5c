#pragma once
// The float64 product of the filter (oracle/float64_filter.h): Y = X·Wᵀ, Eigen's GEMM compiled
// once per vector level (engine/cpu_features.h) and chosen at the call, so every x86-64 CPU runs
// its own widest vectors and none runs an instruction it lacks.
//
// The summation order is Eigen's (register tiles, cache blocks, FMAs), which the filter's bound
// allows: it holds for K exact products summed in any order, and an FMA of an exact product
// rounds as the addition alone would. So the operands must be values whose pairwise products are
// exact in float64 (BF16 values are: 16 significant bits, exponents far inside float64's range).
// Unlike isa_dispatch's kernels, the levels' sums may differ in their last bits: the filter's
// verdicts do not (they are the exact values'), which elements it leaves to the exact path may.
#include <cstdint>

namespace psi::oracle {

// Y[i][c] = Σ_k X[i][k]·W[c][k] for i < M, c < N. X is [M, K] and W [N, K], both row-major and
// dense; Y's rows are ldy apart. One thread: the caller splits the work.
void float64_gemm_abt(const double* X, const double* W, std::int64_t M, std::int64_t N, std::int64_t K, double* Y,
                      std::int64_t ldy);

// The same, compiled for one level each (oracle/float64_gemm_level.h); float64_gemm_abt calls
// the one in force.
namespace gemm_level {
void avx512(const double* X, const double* W, std::int64_t M, std::int64_t N, std::int64_t K, double* Y,
            std::int64_t ldy);
void avx2(const double* X, const double* W, std::int64_t M, std::int64_t N, std::int64_t K, double* Y,
          std::int64_t ldy);
void portable(const double* X, const double* W, std::int64_t M, std::int64_t N, std::int64_t K, double* Y,
              std::int64_t ldy);
}  // namespace gemm_level

}  // namespace psi::oracle
