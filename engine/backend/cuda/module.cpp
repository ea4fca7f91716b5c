// The CUDA backend module's entry point (engine/backend/cuda_module.h). Built only into
// libpsi_cuda_backend.so, which exports this one symbol (cmake/psi_cuda_module.map). Errors
// cross the table as an exit status and a message rather than as exceptions: psi sees a C
// function there.
#include <algorithm>
#include <cstring>
#include <exception>
#include <string>

#include "engine/backend/cuda/cuda_backend.h"
#include "engine/backend/cuda/cuda_device.h"
#include "engine/backend/cuda_module.h"
#include "engine/error.h"
#include "psi_version.h"

namespace {

void copy_out(const std::string& s, char* out, std::size_t size) {
  if (size == 0) return;
  const std::size_t n = std::min(s.size(), size - 1);
  std::memcpy(out, s.data(), n);
  out[n] = '\0';
}

template <class Make>
auto release_or_report(PsiCudaModuleError* error, Make make) -> decltype(make().release()) {
  try {
    return make().release();
  } catch (const psi::Error& e) {
    error->exit_code = int(e.code());
    copy_out(e.what(), error->message, sizeof error->message);
  } catch (const std::exception& e) {
    error->exit_code = int(psi::Exit::run_failed);
    copy_out(e.what(), error->message, sizeof error->message);
  }
  return nullptr;
}

int device_count(char* why, std::size_t why_size) {
  std::string reason;
  const int n = psi::rt::cuda_device_count(&reason);
  copy_out(reason, why, why_size);
  return n;
}

psi::rt::Backend* make_backend(int device, PsiCudaModuleError* error) {
  return release_or_report(error, [device] { return psi::rt::make_cuda_backend(device); });
}

psi::rt::DeviceServices* make_device_services(int device, PsiCudaModuleError* error) {
  return release_or_report(error, [device] { return psi::rt::make_cuda_device_services(device); });
}

const PsiCudaModule kModule{kPsiCudaModuleAbi, PSI_VERSION " (" PSI_GIT_REVISION ")", &device_count, &make_backend,
                            &make_device_services};

}  // namespace

extern "C" const PsiCudaModule* psi_cuda_module() { return &kModule; }
