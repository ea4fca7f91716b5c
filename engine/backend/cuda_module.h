#pragma once
// The CUDA backend module's one entry point. The CUDA backend (engine/backend/cuda/) and every
// CUDA library it needs live in a shared module, libpsi_cuda_backend.so beside the psi program,
// which the factory (backend_factory.cpp) loads only when the CUDA backend could be chosen; psi
// itself links no CUDA library, so a command that needs no backend, or the CPU one, maps none of
// CUDA and runs where CUDA is absent (docs/cuda-backend.md).
//
// The entry point is a C function returning a table of functions. The objects the table hands
// out are psi's C++ interfaces (backend.h, device.h), so psi and the module must come from one
// build: the table opens with the table's version and the module's build (psi version and git
// revision), and the factory refuses a module whose either differs from its own. Those two
// fields stay first in every version, so that any psi can read them from any module.
#include <cstddef>
#include <cstdint>

namespace psi::rt {
class Backend;
class DeviceServices;
}  // namespace psi::rt

// Raised whenever PsiCudaModule changes: a field added, removed or changed in meaning.
inline constexpr std::uint32_t kPsiCudaModuleAbi = 1;
inline constexpr const char* kPsiCudaModuleFile = "libpsi_cuda_backend.so";
inline constexpr const char* kPsiCudaModuleEntry = "psi_cuda_module";

// Why a call failed: psi::Error's exit status and message, cut to fit.
struct PsiCudaModuleError {
  int exit_code;
  char message[1024];
};

struct PsiCudaModule {
  std::uint32_t abi;  // kPsiCudaModuleAbi of the module's build
  const char* build;  // "<PSI_VERSION> (<PSI_GIT_REVISION>)" of the module's build
  // CUDA devices visible; 0 with the reason in `why` (NUL-terminated, at most why_size bytes).
  int (*device_count)(char* why, std::size_t why_size);
  // A new object on device `device`, owned by the caller; null, with `error` filled, when
  // making it failed. The objects run the module's code: the module is never unloaded.
  psi::rt::Backend* (*make_backend)(int device, PsiCudaModuleError* error);
  psi::rt::DeviceServices* (*make_device_services)(int device, PsiCudaModuleError* error);
};

extern "C" {
using PsiCudaModuleEntry = const PsiCudaModule* (*)();
}
