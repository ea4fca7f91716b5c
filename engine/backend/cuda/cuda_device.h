#pragma once
// The CUDA backend's device services (engine/backend/device.h): cudaMemGetInfo, a raw cudaMalloc
// for the fixed budget's reservation, the PCI bus id, the ceilings. A plain C++ header, so that
// the module's entry point (module.cpp) calls it without CUDA headers.
#include <memory>

#include "engine/backend/device.h"

namespace psi::rt {

std::unique_ptr<DeviceServices> make_cuda_device_services(int device);

}  // namespace psi::rt
