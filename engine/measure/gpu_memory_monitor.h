#pragma once
// A run's GPU memory sampling, chosen by its backend: on a backend with a device (CUDA), NVML
// sampling of the device the backend runs on, found by its PCI bus id (the Runtime starts it
// before allocating the arena); on the CPU backend a report saying it does not apply. Never
// throws: when NVML cannot be used the report says why.
#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "engine/measure/gpu_memory_sampler.h"
#include "engine/measure/nvml.h"

namespace psi::rt {

struct GpuMemoryMonitorOptions {
  std::chrono::microseconds period{2000};
  std::string library = kNvmlLibrary;
  int device = 0;  // the backend's device number
};

class GpuMemoryMonitor {
 public:
  GpuMemoryMonitor(std::string_view backend, const GpuMemoryMonitorOptions& options);

  // The report so far; after stop(), the final one.
  GpuMemoryReport report() const;
  // Stops sampling (the end of the run); returns the final report.
  GpuMemoryReport stop();

 private:
  std::unique_ptr<GpuMemorySampler> sampler_;
  GpuMemoryReport fixed_;  // when there is no sampler
};

}  // namespace psi::rt
