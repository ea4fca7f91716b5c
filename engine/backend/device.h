#pragma once
// The device face of a backend: what the layers above ask of its device besides running a block
// on it — the device's memory (the fixed budget's reservation), its identity for NVML (the GPU
// memory sampling) and its measured ceilings (`psi device ceilings`). Only the CUDA backend has
// one; make_device_services (backend_factory.h) hands it out, or says why there is none, so that
// no code above the backend needs to know which backends this build holds.
//
// Self-contained like backend.h, so that the CUDA backend library implements it on its own.
#include <cstdint>
#include <string>
#include <vector>

namespace psi::rt {

struct DeviceMemory {
  std::uint64_t free = 0, total = 0;
};

struct CopyCeiling {
  std::int64_t mib = 0;
  double h2d_gbps = 0, d2h_gbps = 0;
};

struct GemmCeiling {
  std::int64_t m = 0, n = 0, k = 0;
  double ms = 0, tflops = 0;
};

// The physical limits a streamed PSI block is measured against (the reference README's
// h200-ceilings.jsonl): pinned host<->device copy bandwidth by copy size, and the BF16 product
// rate (float32 accumulation) on the block's shapes.
struct Ceilings {
  std::string device;
  std::vector<CopyCeiling> copies;
  std::vector<GemmCeiling> gemms;
};

class DeviceServices {
 public:
  virtual ~DeviceServices() = default;

  // How messages name the device ("CUDA device 0").
  virtual std::string name() const = 0;

  // Free and total memory now; psi::Error (exit 3) naming the call and the driver's message.
  virtual DeviceMemory memory() = 0;
  // A raw allocation of `bytes`, never touched (the fixed budget's reservation); psi::Error
  // (exit 3) naming the size.
  virtual void* reserve(std::uint64_t bytes) = 0;
  // Frees a reserve()d block. Errors are ignored: it runs while unwinding, and would repeat an
  // earlier one.
  virtual void release(void* block) noexcept = 0;

  // The PCI bus id ("0000:3b:00.0"), which names the same device to NVML (the two numberings
  // differ in general); empty, with the driver's reason in *why, when it cannot say.
  virtual std::string pci_bus_id(std::string* why) = 0;

  // Each measurement the median of `repeats` timed runs after warm-ups; std::runtime_error
  // naming the failed call.
  virtual Ceilings measure_ceilings(int repeats) = 0;
};

}  // namespace psi::rt
