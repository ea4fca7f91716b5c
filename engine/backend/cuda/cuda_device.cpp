#include "engine/backend/cuda/cuda_device.h"

#include <cuda_runtime.h>

#include <string>

#include "engine/backend/cuda/ceilings.h"
#include "engine/error.h"

namespace psi::rt {
namespace {

// The memory calls serve only the fixed budget, so their errors name it.
void check(cudaError_t e, const std::string& what) {
  if (e == cudaSuccess) return;
  cudaGetLastError();  // an out-of-memory error must not resurface in the run's later CUDA calls
  throw Error("fixed budget: " + what + " failed: " + cudaGetErrorString(e), Exit::run_failed);
}

class CudaDeviceServices final : public DeviceServices {
 public:
  explicit CudaDeviceServices(int device) : device_(device) {}

  std::string name() const override { return "CUDA device " + std::to_string(device_); }

  DeviceMemory memory() override {
    check(cudaSetDevice(device_), "cudaSetDevice(" + std::to_string(device_) + ")");
    std::size_t free = 0, total = 0;
    check(cudaMemGetInfo(&free, &total), "cudaMemGetInfo on CUDA device " + std::to_string(device_));
    return {free, total};
  }

  void* reserve(std::uint64_t bytes) override {
    check(cudaSetDevice(device_), "cudaSetDevice(" + std::to_string(device_) + ")");
    void* p = nullptr;
    check(cudaMalloc(&p, bytes),
          "cudaMalloc of the " + std::to_string(bytes) + "-byte reservation on CUDA device " + std::to_string(device_));
    return p;
  }

  void release(void* block) noexcept override {
    if (!block) return;
    cudaSetDevice(device_);
    cudaFree(block);
  }

  std::string pci_bus_id(std::string* why) override {
    char id[64] = {};  // "dddd:bb:dd.f" plus room; CUDA truncates to the length given
    const cudaError_t e = cudaDeviceGetPCIBusId(id, int(sizeof id), device_);
    if (e != cudaSuccess) {
      if (why) *why = std::string("cudaDeviceGetPCIBusId(") + std::to_string(device_) + ") failed: " + cudaGetErrorString(e);
      cudaGetLastError();  // clear it so later CUDA calls do not report it again
      return {};
    }
    return id;
  }

  Ceilings measure_ceilings(int repeats) override { return measure_cuda_ceilings(device_, repeats); }

 private:
  int device_;
};

}  // namespace

std::unique_ptr<DeviceServices> make_cuda_device_services(int device) {
  return std::make_unique<CudaDeviceServices>(device);
}

}  // namespace psi::rt
