// A CUDA backend module from another build of psi, for test_backend_module: the entry point is
// there, but the table's version is not this psi's. psi reads the table's first two fields only
// and refuses it, so the functions are never called.
#include "engine/backend/cuda_module.h"

namespace {
const PsiCudaModule kStale{kPsiCudaModuleAbi + 1, "0.0.0 (stale)", nullptr, nullptr, nullptr};
}

extern "C" const PsiCudaModule* psi_cuda_module() { return &kStale; }
