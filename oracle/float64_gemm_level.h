#pragma once
// The body of one level's float64 GEMM (oracle/float64_gemm.h), included by the one source file
// per level, each compiled with that level's instruction-set flags (CMakeLists.txt): Eigen
// chooses its vectors by the compiler's flags, not by target attributes.
//
// Eigen's functions are inline templates, and the linker keeps one copy of each among all the
// object files that define it; one level's copy would then serve every level, and an AVX-512
// copy would die of SIGILL on a CPU without AVX-512. So each file renames Eigen's namespace to
// its own (PSI_EIGEN_NAMESPACE, defined before this header): its Eigen is a different set of
// functions from the other levels'. The standard library's inline functions Eigen's product
// calls are scalar (std::min, std::max).
#ifndef PSI_EIGEN_NAMESPACE
#error "define PSI_EIGEN_NAMESPACE (a name for this level's copy of Eigen) before including float64_gemm_level.h"
#endif
#define Eigen PSI_EIGEN_NAMESPACE
// Threads are the caller's (oracle/split.h), never OpenMP's.
#define EIGEN_DONT_PARALLELIZE
// GCC 12 sees _mm256_undefined_pd, which AVX-512's extract intrinsic passes, as uninitialised.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <Eigen/Core>

#include <cstdint>

namespace psi::oracle::gemm_level {
namespace {

void eigen_gemm_abt(const double* x, const double* w, std::int64_t m, std::int64_t n, std::int64_t k, double* y,
                    std::int64_t ldy) {
  if (m <= 0 || n <= 0) return;
  using Rows = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const Eigen::Map<const Rows> X(x, m, k), W(w, n, k);
  Eigen::Map<Rows, 0, Eigen::OuterStride<>> Y(y, m, n, Eigen::OuterStride<>(ldy));
  Y.noalias() = X * W.transpose();
}

}  // namespace
}  // namespace psi::oracle::gemm_level
