// The float64 GEMM at the portable level (oracle/float64_gemm_level.h), compiled with the build's baseline flags (x86-64: SSE2).
#define PSI_EIGEN_NAMESPACE psi_eigen_portable
#include "oracle/float64_gemm_level.h"

#include "oracle/float64_gemm.h"

namespace psi::oracle::gemm_level {

void portable(const double* X, const double* W, std::int64_t M, std::int64_t N, std::int64_t K, double* Y, std::int64_t ldy) {
  eigen_gemm_abt(X, W, M, N, K, Y, ldy);
}

}  // namespace psi::oracle::gemm_level
