#include "engine/backend/backend_factory.h"

#include <iostream>

#include "engine/error.h"
#ifdef PSI_CUDA_MODULE
#include <dlfcn.h>

#include <filesystem>

#include "engine/backend/cuda_module.h"
#include "psi_version.h"
#endif

namespace psi::rt {

#ifdef PSI_CUDA_MODULE
namespace {

struct CudaModule {
  const PsiCudaModule* api = nullptr;
  std::string error;  // why api is null
};

// The module is the file beside the running program, by absolute path: never a library search
// path or the current directory, so the only CUDA code psi runs is the one installed with it.
CudaModule load_cuda_module() {
  CudaModule m;
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) {
    m.error = "the CUDA backend module was not looked for: /proc/self/exe does not name psi's program (" +
              ec.message() + ")";
    return m;
  }
  const std::string path = (exe.parent_path() / kPsiCudaModuleFile).string();
  const std::string what = "the CUDA backend module " + path;
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* e = dlerror();
    m.error = what + " did not load: " + (e ? e : "dlopen failed");
    return m;
  }
  const auto entry = reinterpret_cast<PsiCudaModuleEntry>(dlsym(handle, kPsiCudaModuleEntry));
  const PsiCudaModule* api = entry ? entry() : nullptr;
  const std::string mine = PSI_VERSION " (" PSI_GIT_REVISION ")";
  if (!api) {
    m.error = what + " is not a psi CUDA backend module (no " + kPsiCudaModuleEntry + " entry point)";
  } else if (api->abi != kPsiCudaModuleAbi || !api->build || api->build != mine) {
    m.error = what + " is stale: it was built for psi " + (api->build ? api->build : "?") + " with module interface " +
              std::to_string(api->abi) + ", this is psi " + mine + " with interface " +
              std::to_string(kPsiCudaModuleAbi) + "; install the module built with this psi";
  } else {
    m.api = api;
    // Never unloaded: the backends and device services it makes run its code until exit.
    return m;
  }
  dlclose(handle);
  return m;
}

// Loaded on first use, once per process.
const CudaModule& cuda_module() {
  static const CudaModule m = load_cuda_module();
  return m;
}

[[noreturn]] void rethrow(const PsiCudaModuleError& e) {
  throw Error(e.message, Exit(e.exit_code));
}

}  // namespace
#endif

bool cuda_backend_built() {
#ifdef PSI_CUDA_MODULE
  return true;
#else
  return false;
#endif
}

bool cuda_backend_loaded(std::string* why) {
#ifdef PSI_CUDA_MODULE
  const CudaModule& m = cuda_module();
  if (!m.api && why) *why = m.error;
  return m.api != nullptr;
#else
  if (why) why->clear();
  return false;
#endif
}

int cuda_devices(std::string* why) {
#ifdef PSI_CUDA_MODULE
  const CudaModule& m = cuda_module();
  if (!m.api) {
    if (why) *why = m.error;
    return 0;
  }
  char reason[512] = {};
  const int n = m.api->device_count(reason, sizeof reason);
  if (n <= 0 && why) *why = reason;
  return n;
#else
  if (why) *why = "built without CUDA";
  return 0;
#endif
}

std::string_view backend_name(BackendKind k) { return k == BackendKind::cuda ? "cuda" : "cpu"; }

BackendKind parse_backend_kind(std::string_view name) {
  if (name == "cpu") return BackendKind::cpu;
  if (name == "cuda") return BackendKind::cuda;
  throw Error("backend \"" + std::string(name) + "\" is not one of cpu, cuda");
}

void check_backend_request(std::string_view requested) {
  if (requested != "auto" && requested != "cpu" && requested != "cuda")
    throw Error("backend \"" + std::string(requested) + "\" is not one of auto, cpu, cuda");
}

BackendTraits backend_traits(BackendKind k) {
  if (k == BackendKind::cuda) return {.host_bits = false, .resident_weights = true, .device_pool = true};
  return {};
}

BackendKind choose_backend(std::string_view requested, int device_count, bool cuda_loaded,
                           std::string_view why_none, bool chaos, std::string* note) {
  check_backend_request(requested);
  if (requested == "cpu") return BackendKind::cpu;
  if (requested == "cuda") {
    if (!cuda_loaded)
      throw Error("backend cuda requested but " +
                  (why_none.empty() ? "this psi was built without the CUDA backend (no nvcc at configure time)"
                                    : std::string(why_none)));
    if (device_count <= 0)
      throw Error("backend cuda requested but no CUDA device is available (" + std::string(why_none) + ")");
    if (chaos) throw Error("chaos mode needs the cpu backend; backend cuda was requested");
    return BackendKind::cuda;
  }
  // "auto". Chaos mode exists only on the CPU backend, so asking for it pins the CPU.
  if (cuda_loaded && device_count > 0 && !chaos) return BackendKind::cuda;
  if (note) {
    if (chaos)
      *note = "psi: note: chaos mode requested; using the CPU backend";
    else if (!cuda_loaded)
      *note = "psi: note: " + (why_none.empty() ? "built without the CUDA backend" : std::string(why_none)) +
              "; using the CPU backend";
    else
      *note = "psi: note: no CUDA device (" + std::string(why_none) + "); using the CPU backend";
  }
  return BackendKind::cpu;
}

BackendKind resolve_backend(std::string_view requested, bool chaos, std::string* note) {
  // The module is loaded and the driver probed only when CUDA could be chosen: "cpu" must work
  // where CUDA is absent or broken, without mapping any of it.
  std::string why;
  const bool loaded = (requested == "cuda" || requested == "auto") && cuda_backend_loaded(&why);
  const int count = loaded ? cuda_devices(&why) : 0;
  return choose_backend(requested, count, loaded, why, chaos, note);
}

BackendChoice make_backend(std::string_view requested, const CpuBackendOptions& cpu) {
  BackendChoice out;
  const BackendKind kind = resolve_backend(requested, cpu.chaos_seed.has_value(), &out.note);
  if (!out.note.empty()) std::cerr << out.note << "\n";
#ifdef PSI_CUDA_MODULE
  if (kind == BackendKind::cuda) {
    PsiCudaModuleError e{};
    Backend* b = cuda_module().api->make_backend(0, &e);
    if (!b) rethrow(e);
    out.backend.reset(b);
    return out;
  }
#else
  (void)kind;  // never cuda in a build without it
#endif
  out.backend = make_cpu_backend(cpu);
  return out;
}

DeviceServicesChoice make_device_services(std::string_view backend, [[maybe_unused]] int device) {
  DeviceServicesChoice out;
  if (backend != "cuda") {
    out.why = "the " + std::string(backend) + " backend has no device";
    return out;
  }
  out.has_device = true;
#ifdef PSI_CUDA_MODULE
  if (!cuda_backend_loaded(&out.why)) return out;
  PsiCudaModuleError e{};
  DeviceServices* s = cuda_module().api->make_device_services(device, &e);
  if (!s) rethrow(e);
  out.services.reset(s);
#else
  out.why = "this psi was built without the CUDA backend";
#endif
  return out;
}

}  // namespace psi::rt
