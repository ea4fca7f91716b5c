#pragma once
// The CUDA backend: the same interface on cudaStream/cudaEvent, one cudaMalloc for the arena,
// cudaMallocHost for pinned staging, cudaMemcpyAsync for copies. Compiled only when nvcc is
// found (PSI_HAVE_CUDA); selected at run time only when a device is present.
#include <cstddef>
#include <memory>
#include <string>

#include "engine/runtime/backend.h"

namespace psi::rt {

// Number of CUDA devices; 0 when there is no device or no driver, with the reason in *why.
int cuda_device_count(std::string* why);

std::unique_ptr<Backend> make_cuda_backend(int device);

// The cuBLAS settings psi pins so that products are reproducible run to run: the default math
// mode (no TF32), BF16 reduced-precision reductions left as cuBLAS's default for
// CUBLAS_DEFAULT_MATH (allowed, as in PyTorch's default), atomics not allowed (deterministic
// split-K reductions), and a workspace that lies inside the arena (no allocation of its own).
struct CudaBlasSettings {
  int math_mode = 0;                         // the cublasMath_t value set
  bool reduced_precision_reduction = true;   // CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION absent
  bool atomics_allowed = false;              // cublasAtomicsMode_t read back after setting
  std::size_t workspace_bytes = 0;
};

// A cuBLAS handle bound to a CUDA backend stream (Backend::native_stream), with the settings
// above. `workspace` is a device pointer into the arena's workspace region.
class CudaBlas {
 public:
  CudaBlas(void* native_stream, void* workspace, std::size_t workspace_bytes);
  ~CudaBlas();
  CudaBlas(const CudaBlas&) = delete;
  CudaBlas& operator=(const CudaBlas&) = delete;

  void* handle() const { return handle_; }  // a cublasHandle_t
  const CudaBlasSettings& settings() const { return settings_; }

 private:
  void* handle_ = nullptr;
  CudaBlasSettings settings_;
};

}  // namespace psi::rt
