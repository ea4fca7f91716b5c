#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "engine/error.h"
#include "engine/runtime/cuda/cuda_backend.h"

namespace psi::rt {
namespace {

void check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw Error(std::string("cublas: ") + what + " failed: " + cublasGetStatusString(s), Exit::run_failed);
}

}  // namespace

CudaBlas::CudaBlas(void* native_stream, void* workspace, std::size_t workspace_bytes) {
  cublasHandle_t h = nullptr;
  check(cublasCreate(&h), "cublasCreate");
  handle_ = h;
  try {
    check(cublasSetStream(h, static_cast<cudaStream_t>(native_stream)), "cublasSetStream");
    check(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
    check(cublasSetAtomicsMode(h, CUBLAS_ATOMICS_NOT_ALLOWED), "cublasSetAtomicsMode");
    check(cublasSetWorkspace(h, workspace, workspace_bytes), "cublasSetWorkspace");
    cublasMath_t mode{};
    check(cublasGetMathMode(h, &mode), "cublasGetMathMode");
    cublasAtomicsMode_t atomics{};
    check(cublasGetAtomicsMode(h, &atomics), "cublasGetAtomicsMode");
    settings_.math_mode = int(mode);
    settings_.reduced_precision_reduction = (int(mode) & int(CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)) == 0;
    settings_.atomics_allowed = atomics == CUBLAS_ATOMICS_ALLOWED;
    settings_.workspace_bytes = workspace_bytes;
  } catch (...) {
    cublasDestroy(h);
    throw;
  }
}

CudaBlas::~CudaBlas() { cublasDestroy(static_cast<cublasHandle_t>(handle_)); }

}  // namespace psi::rt
