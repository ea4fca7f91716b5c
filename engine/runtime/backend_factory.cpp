#include "engine/runtime/backend_factory.h"

#include <iostream>

#include "engine/error.h"
#ifdef PSI_HAVE_CUDA
#include "engine/runtime/cuda/cuda_backend.h"
#endif

namespace psi::rt {

bool cuda_backend_built() {
#ifdef PSI_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

BackendKind choose_backend(std::string_view requested, int device_count, bool cuda_built,
                           std::string_view why_none, bool chaos, std::string* note) {
  if (requested != "auto" && requested != "cpu" && requested != "cuda")
    throw Error("backend \"" + std::string(requested) + "\" is not one of auto, cpu, cuda");
  if (requested == "cpu") return BackendKind::cpu;
  if (requested == "cuda") {
    if (!cuda_built)
      throw Error("backend cuda requested but this psi was built without the CUDA backend (no nvcc at configure time)");
    if (device_count <= 0)
      throw Error("backend cuda requested but no CUDA device is available (" + std::string(why_none) + ")");
    if (chaos) throw Error("chaos mode needs the cpu backend; backend cuda was requested");
    return BackendKind::cuda;
  }
  // "auto". Chaos mode exists only on the CPU backend, so asking for it pins the CPU.
  if (cuda_built && device_count > 0 && !chaos) return BackendKind::cuda;
  if (note) {
    if (chaos)
      *note = "psi: note: chaos mode requested; using the CPU backend";
    else if (!cuda_built)
      *note = "psi: note: built without the CUDA backend; using the CPU backend";
    else
      *note = "psi: note: no CUDA device (" + std::string(why_none) + "); using the CPU backend";
  }
  return BackendKind::cpu;
}

BackendChoice make_backend(std::string_view requested, const CpuBackendOptions& cpu) {
  int count = 0;
  std::string why = "built without CUDA";
  // Only probe the driver when CUDA could be chosen: "cpu" must work where the driver is broken.
#ifdef PSI_HAVE_CUDA
  if (requested != "cpu") count = cuda_device_count(&why);
#endif
  BackendChoice out;
  const BackendKind kind = choose_backend(requested, count, cuda_backend_built(), why,
                                          cpu.chaos_seed.has_value(), &out.note);
  if (!out.note.empty()) std::cerr << out.note << "\n";
#ifdef PSI_HAVE_CUDA
  if (kind == BackendKind::cuda) {
    out.backend = make_cuda_backend(0);
    return out;
  }
#endif
  out.backend = make_cpu_backend(cpu);
  return out;
}

}  // namespace psi::rt
