#include "engine/backend/backend_factory.h"

#include <iostream>

#include "engine/error.h"
#ifdef PSI_HAVE_CUDA
#include "engine/backend/cuda/cuda_backend.h"
#include "engine/backend/cuda/cuda_device.h"
#endif

namespace psi::rt {

bool cuda_backend_built() {
#ifdef PSI_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

int cuda_devices(std::string* why) {
#ifdef PSI_HAVE_CUDA
  return cuda_device_count(why);
#else
  if (why) *why = "built without CUDA";
  return 0;
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
  std::string why;
  // Only probe the driver when CUDA could be chosen: "cpu" must work where the driver is broken.
  const int count = requested == "cpu" ? 0 : cuda_devices(&why);
  BackendChoice out;
  const BackendKind kind = choose_backend(requested, count, cuda_backend_built(), why,
                                          cpu.chaos_seed.has_value(), &out.note);
  if (!out.note.empty()) std::cerr << out.note << "\n";
#ifdef PSI_HAVE_CUDA
  out.backend = kind == BackendKind::cuda ? make_cuda_backend(0) : make_cpu_backend(cpu);
#else
  (void)kind;  // choose_backend never returns cuda in a build without it
  out.backend = make_cpu_backend(cpu);
#endif
  return out;
}

DeviceServicesChoice make_device_services(std::string_view backend, [[maybe_unused]] int device) {
  DeviceServicesChoice out;
  if (backend != "cuda") {
    out.why = "the " + std::string(backend) + " backend has no device";
    return out;
  }
  out.has_device = true;
#ifdef PSI_HAVE_CUDA
  out.services = make_cuda_device_services(device);
#else
  out.why = "this psi was built without the CUDA backend";
#endif
  return out;
}

}  // namespace psi::rt
