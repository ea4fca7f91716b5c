#pragma once
// NVML, the NVIDIA driver's management library, loaded at run time with dlopen: psi links
// nothing of it, so builds and machines without a GPU driver run unchanged. nvml.cpp declares
// the few entry points and structures the memory sampler uses itself, from the NVML API
// reference, rather than needing the vendor header.
#include <cstdint>
#include <span>
#include <string>

#include "engine/measure/gpu_memory_sampler.h"

namespace psi::rt {

// The name the driver installs (the unversioned libnvidia-ml.so comes only with a toolkit).
inline constexpr const char* kNvmlLibrary = "libnvidia-ml.so.1";

// Which device to read. By PCI bus id when known: CUDA and NVML number devices in different
// orders, and CUDA_VISIBLE_DEVICES renumbers only CUDA's. Otherwise by NVML index.
struct NvmlDevice {
  std::string pci_bus_id;  // "0000:3b:00.0"; empty: use index
  unsigned index = 0;
};

struct NvmlOpen {
  GpuMemorySource source;  // empty when NVML cannot be used
  std::string why;         // one line, when source is empty
};

// Loads `library` (once per process; NVML stays initialized while any source uses it), finds
// `device`, and returns a source reading the device's used and total memory and this process's
// (getpid()) entry among the device's compute processes. Never throws: a missing library, a
// failed initialization or a device that cannot be found come back in `why`.
NvmlOpen open_nvml(const std::string& library, const NvmlDevice& device);

// One compute process as NVML lists it; used_bytes is NVML_VALUE_NOT_AVAILABLE (all bits set)
// when the driver has no figure for it.
struct NvmlProcessEntry {
  std::uint32_t pid = 0;
  std::uint64_t used_bytes = 0;
};
inline constexpr std::uint64_t kNvmlValueNotAvailable = ~std::uint64_t(0);

// The reading for process `pid` from a device's memory figures and process list. A pid listed
// more than once (one entry per MIG instance) is summed.
GpuMemoryReading nvml_reading(std::uint32_t pid, std::uint64_t device_used, std::uint64_t device_total,
                              std::span<const NvmlProcessEntry> processes);

}  // namespace psi::rt
