#pragma once
// One CUDA device's free memory and a raw allocation of it, for the fixed-budget reservation
// (engine/runtime/budget.h). A plain C++ header: psi_engine calls these without CUDA headers.
#include <cstdint>

namespace psi::rt {

struct CudaMemory {
  std::uint64_t free = 0, total = 0;
};

// cudaMemGetInfo on `device`; psi::Error (exit 3) naming the call and CUDA's message.
CudaMemory cuda_memory_info(int device);
// cudaMalloc of `bytes` on `device`, never touched; psi::Error (exit 3) naming the size.
void* cuda_reserve(int device, std::uint64_t bytes);
// cudaFree; errors are ignored (it runs while unwinding, and would repeat an earlier one).
void cuda_release(int device, void* block) noexcept;

}  // namespace psi::rt
