#pragma once
// The CUDA OpKernels' products through cuBLASLt, set up the way PyTorch 2.11 sets up a BF16
// nn.Linear on CUDA (at::cuda::blas::gemm_and_bias): what is pinned and why is in
// cuda_gemm.cpp and docs/cuda-backend.md. Internal to the CUDA backend library; plain C++ (the
// stream and the device pointers are void*).
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "engine/backend/cuda/cuda_kernels.h"

namespace psi::rt::cuda {

// A row-major matrix in device memory: element (r, c) at data + (r·ld + c) elements.
struct DevMat {
  const void* data = nullptr;
  std::int64_t rows = 0, cols = 0, ld = 0;
};

// One product D = alpha·(x · wᵀ) + beta·C with C = D = out, row-major [x.rows, w.rows].
struct GemmCall {
  DevMat x;                       // BF16 [M, K]
  DevMat w;                       // BF16 [N, K] (PyTorch's weight layout)
  void* out = nullptr;            // BF16 or float32 [M, N], row stride out_ld
  std::int64_t out_ld = 0;
  bool out_f32 = false;           // float32 output (the accumulator) instead of BF16
  const void* bias = nullptr;     // BF16 [N] added in the epilogue before the one write, or null
  float beta = 0.0f;              // 1: add the output's current contents (accumulate)
  const char* what = "linear";    // names the product in errors and in the settings report
};

class CudaGemm {
 public:
  explicit CudaGemm(std::size_t workspace_bytes);
  ~CudaGemm();
  CudaGemm(const CudaGemm&) = delete;
  CudaGemm& operator=(const CudaGemm&) = delete;

  std::size_t workspace_bytes() const { return workspace_bytes_; }
  void bind_workspace(void* workspace, std::size_t bytes);

  // Enqueues the product on `stream` (a cudaStream_t). Returns false when cuBLASLt has no
  // algorithm for it (the caller then takes the unfused path, as PyTorch does); throws
  // psi::Error (Exit::run_failed) on any other failure.
  bool run(void* stream, const GemmCall& call);

  CudaGemmSettings settings() const;

 private:
  struct Plan;
  Plan& plan_for(const GemmCall& call);

  std::size_t workspace_bytes_;
  void* workspace_ = nullptr;
  void* handle_ = nullptr;  // cublasLtHandle_t
  mutable std::mutex mutex_;
  std::map<std::string, std::unique_ptr<Plan>> plans_;  // by problem key
  std::map<std::string, std::size_t> order_;            // problem key -> order first seen
};

}  // namespace psi::rt::cuda
