#include "engine/runtime/cuda/reservation.h"

#include <cuda_runtime.h>

#include <string>

#include "engine/error.h"

namespace psi::rt {
namespace {

void check(cudaError_t e, const std::string& what) {
  if (e == cudaSuccess) return;
  cudaGetLastError();  // an out-of-memory error must not resurface in the run's later CUDA calls
  throw Error("fixed budget: " + what + " failed: " + cudaGetErrorString(e), Exit::run_failed);
}

}  // namespace

CudaMemory cuda_memory_info(int device) {
  check(cudaSetDevice(device), "cudaSetDevice(" + std::to_string(device) + ")");
  std::size_t free = 0, total = 0;
  check(cudaMemGetInfo(&free, &total), "cudaMemGetInfo on CUDA device " + std::to_string(device));
  return {free, total};
}

void* cuda_reserve(int device, std::uint64_t bytes) {
  check(cudaSetDevice(device), "cudaSetDevice(" + std::to_string(device) + ")");
  void* p = nullptr;
  check(cudaMalloc(&p, bytes),
        "cudaMalloc of the " + std::to_string(bytes) + "-byte reservation on CUDA device " + std::to_string(device));
  return p;
}

void cuda_release(int device, void* block) noexcept {
  if (!block) return;
  cudaSetDevice(device);
  cudaFree(block);
}

}  // namespace psi::rt
