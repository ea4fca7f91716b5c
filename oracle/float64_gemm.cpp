#include "oracle/float64_gemm.h"

#include "engine/cpu_features.h"
#include "engine/isa_dispatch.h"

namespace psi::oracle {

void float64_gemm_abt(const double* X, const double* W, std::int64_t M, std::int64_t N, std::int64_t K, double* Y,
                      std::int64_t ldy) {
  const Isa isa = active_isa();
  note_dispatched_isa(isa);
  switch (isa) {
    case Isa::avx512: return gemm_level::avx512(X, W, M, N, K, Y, ldy);
    case Isa::avx2: return gemm_level::avx2(X, W, M, N, K, Y, ldy);
    case Isa::portable: break;
  }
  gemm_level::portable(X, W, M, N, K, Y, ldy);
}

}  // namespace psi::oracle
