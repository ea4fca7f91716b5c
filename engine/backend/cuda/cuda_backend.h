#pragma once
// The CUDA backend: the same interface on cudaStream/cudaEvent, cudaMallocHost for pinned
// staging, cudaMemcpyAsync for copies, and the CUDA OpKernels (cuda_kernels.h) in every kernel
// context. Compiled only when nvcc is found (PSI_HAVE_CUDA), into the module the factory loads
// (engine/backend/cuda_module.h); selected at run time only when a device is present.
//
// Device memory: allocate_arena(A) makes the run's ONE cudaMalloc, of A bytes plus the cuBLASLt
// workspace W after them. The executor sees only the A bytes of its arena; W is device memory
// outside the arena the user asked for, and cuda_backend_report says so (the products cannot
// run without it: cuBLASLt's split-K and epilogue kernels stage partial results there).
#include <cstddef>
#include <memory>
#include <string>

#include "engine/backend/backend.h"
#include "engine/backend/cuda/cuda_kernels.h"

namespace psi::rt {

// Number of CUDA devices; 0 when there is no device or no driver, with the reason in *why.
int cuda_device_count(std::string* why);

std::unique_ptr<Backend> make_cuda_backend(int device, const CudaKernelSettings& settings = {});

// What a CUDA backend holds on the device and how its products are set up.
struct CudaBackendReport {
  std::string device;                          // cudaDeviceProp::name and compute capability
  std::size_t arena_bytes = 0;                 // the arena the executor manages (0 before allocate_arena)
  std::size_t blas_workspace_bytes = 0;        // cuBLASLt workspace, outside the arena, same allocation
  std::size_t device_allocation_bytes = 0;     // the one cudaMalloc: arena (padded to 256) + workspace
  CudaGemmSettings gemm;

  // Several lines: the memory figures, then gemm.describe().
  std::string describe() const;
};

// The report of a backend made by make_cuda_backend; throws psi::Error for any other backend.
CudaBackendReport cuda_backend_report(const Backend& backend);

}  // namespace psi::rt
