#pragma once
// The CUDA backend's OpKernels: device kernels for every elementwise, norm, RoPE, gate and
// softmax operator (one .cu per engine/ops family: gemm, activation, norm, adaln, rope,
// attention; arithmetic in element_math.h) and cuBLASLt products (cuda_gemm.cpp). Plain C++
// header (no CUDA types), so the backend, the run report and the tests can include it from host
// code.
//
// Which results are bitwise equal to the CPU backend's and why the others are not:
// docs/cuda-backend.md.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/backend/op_kernels.h"

namespace psi::rt {

// The settings a CUDA OpKernels is made with.
struct CudaKernelSettings {
  // cuBLASLt workspace (CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES and the buffer handed to
  // cublasLtMatmul): 32 MiB, the cuBLAS workspace PyTorch uses on compute capability 9.x, which
  // PyTorch's unified cuBLAS/cuBLASLt workspace hands to cuBLASLt (docs/cuda-backend.md).
  std::size_t blas_workspace_bytes = std::size_t(32) << 20;
};

// One product shape as cuBLASLt saw it and the algorithm its heuristic returned
// (cublasLtMatmulAlgoConfigGetAttribute).
struct CudaGemmAlgo {
  std::string problem;        // "linear m=.. n=.. k=.. lda=.. ..." in cuBLAS's column-major terms
  std::int32_t algo_id = -1;  // CUBLASLT_ALGO_CONFIG_ID
  std::uint32_t tile_id = 0;  // CUBLASLT_ALGO_CONFIG_TILE_ID (cublasLtMatmulTile_t)
  std::int32_t splitk = 0;    // CUBLASLT_ALGO_CONFIG_SPLITK_NUM
  std::uint32_t reduction_scheme = 0;  // CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME (cublasLtReductionScheme_t)
  std::uint32_t stages_id = 0;         // CUBLASLT_ALGO_CONFIG_STAGES_ID
  std::uint32_t swizzle = 0;           // CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING
  std::uint32_t custom_option = 0;     // CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION
  std::size_t workspace_needed = 0;    // the heuristic result's workspaceSize
  std::uint64_t calls = 0;             // products run with it
};

// The products' fixed settings and every algorithm chosen so far.
struct CudaGemmSettings {
  std::string library;        // "cuBLASLt <version>"
  std::string compute_type;   // "CUBLAS_COMPUTE_32F"
  std::string scale_type;     // "CUDA_R_32F"
  std::string ab_type;        // "CUDA_R_16BF"
  std::string bias_epilogue;  // "CUBLASLT_EPILOGUE_BIAS (BF16 bias, fused_f32)"
  std::size_t workspace_bytes = 0;
  std::uint32_t reduction_scheme_mask = 0;  // CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK
  int heuristic_requested = 0;              // algorithms asked of cublasLtMatmulAlgoGetHeuristic
  std::vector<CudaGemmAlgo> algorithms;     // in the order first seen

  // Several lines, one per setting and one per algorithm.
  std::string describe() const;
};

class CudaOpKernels : public OpKernels {
 public:
  // Binds the device memory the kernels use: the arena (its size, for the bound checks; the
  // base itself arrives in every KernelContext) and the cuBLASLt workspace. Until this is
  // called, every method throws.
  virtual void bind(std::size_t arena_bytes, void* blas_workspace, std::size_t blas_workspace_bytes) = 0;
  virtual CudaGemmSettings gemm_settings() const = 0;
};

// Creates the cuBLASLt handle (one per OpKernels). Needs a CUDA device (throws psi::Error with
// Exit::run_failed otherwise).
std::unique_ptr<CudaOpKernels> make_cuda_op_kernels(const CudaKernelSettings& settings = {});

}  // namespace psi::rt
