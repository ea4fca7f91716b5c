// The float64 GEMM at the avx2 level (oracle/float64_gemm_level.h), compiled with AVX2 and FMA (CMakeLists.txt).
#define PSI_EIGEN_NAMESPACE psi_eigen_avx2
#include "oracle/float64_gemm_level.h"

#include "oracle/float64_gemm.h"

namespace psi::oracle::gemm_level {

void avx2(const double* X, const double* W, std::int64_t M, std::int64_t N, std::int64_t K, double* Y, std::int64_t ldy) {
  eigen_gemm_abt(X, W, M, N, K, Y, ldy);
}

}  // namespace psi::oracle::gemm_level
