#include "engine/measure/gpu_memory_monitor.h"

#include "engine/backend/backend_factory.h"

namespace psi::rt {

GpuMemoryMonitor::GpuMemoryMonitor(std::string_view backend, const GpuMemoryMonitorOptions& options) {
  const DeviceServicesChoice d = make_device_services(backend, options.device);
  if (!d.has_device) {
    fixed_ = gpu_memory_not_applicable("the " + std::string(backend) + " backend has no GPU memory");
    return;
  }
  NvmlDevice device;
  if (d.services) {
    std::string why;
    device.pci_bus_id = d.services->pci_bus_id(&why);
    if (device.pci_bus_id.empty()) {
      fixed_ = gpu_memory_unavailable(d.services->name() + " could not be matched to an NVML device: " + why);
      return;
    }
  } else {
    // A build without the backend has no device numbering to translate (only the tests ask):
    // NVML's index is taken as the device number.
    device.index = unsigned(options.device);
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
