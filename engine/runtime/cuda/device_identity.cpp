#include "engine/runtime/cuda/device_identity.h"

#include <cuda_runtime.h>

namespace psi::rt {

std::string cuda_pci_bus_id(int device, std::string* why) {
  char id[64] = {};  // "dddd:bb:dd.f" plus room; CUDA truncates to the length given
  const cudaError_t e = cudaDeviceGetPCIBusId(id, int(sizeof id), device);
  if (e != cudaSuccess) {
    if (why) *why = std::string("cudaDeviceGetPCIBusId(") + std::to_string(device) + ") failed: " + cudaGetErrorString(e);
    cudaGetLastError();  // clear it so later CUDA calls do not report it again
    return {};
  }
  return id;
}

}  // namespace psi::rt
