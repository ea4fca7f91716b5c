#include "engine/runtime/gpu_memory_monitor.h"

#ifdef PSI_HAVE_CUDA
#include "engine/runtime/cuda/device_identity.h"
#endif

namespace psi::rt {
namespace {

// NVML's name for CUDA device `device`. Without the CUDA backend there is no CUDA numbering to
// translate (only the tests ask), and NVML's index is used.
bool nvml_device_of(int device, NvmlDevice* out, std::string* why) {
#ifdef PSI_HAVE_CUDA
  out->pci_bus_id = cuda_pci_bus_id(device, why);
  return !out->pci_bus_id.empty();
#else
  (void)why;
  out->index = unsigned(device);
  return true;
#endif
}

}  // namespace

GpuMemoryMonitor::GpuMemoryMonitor(std::string_view backend, const GpuMemoryMonitorOptions& options) {
  if (backend != "cuda") {
    fixed_ = gpu_memory_not_applicable("the " + std::string(backend) + " backend has no GPU memory");
    return;
  }
  NvmlDevice device;
  std::string why;
  if (!nvml_device_of(options.cuda_device, &device, &why)) {
    fixed_ = gpu_memory_unavailable("CUDA device " + std::to_string(options.cuda_device) +
                                    " could not be matched to an NVML device: " + why);
    return;
  }
  NvmlOpen nvml = open_nvml(options.library, device);
  if (!nvml.source) {
    fixed_ = gpu_memory_unavailable(nvml.why);
    return;
  }
  sampler_ = std::make_unique<GpuMemorySampler>(std::move(nvml.source), options.period);
}

GpuMemoryReport GpuMemoryMonitor::report() const { return sampler_ ? sampler_->snapshot() : fixed_; }

GpuMemoryReport GpuMemoryMonitor::stop() { return sampler_ ? sampler_->stop() : fixed_; }

}  // namespace psi::rt
