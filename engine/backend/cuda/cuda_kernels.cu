// The CUDA OpKernels' shared part: binding to the arena, copies, the operand checks every
// family uses (kernel_common.cuh) and the factory. Each operator family's kernels and methods
// are in the .cu named after its engine/ops family (gemm, activation, norm, adaln, rope,
// attention). Element arithmetic comes from element_math.h (explicit IEEE rounding, no
// contraction); products go to cuBLASLt (cuda_gemm.cpp). No device memory is used beyond the
// arena regions passed in and the cuBLASLt workspace.
#include "engine/backend/cuda/kernel_common.cuh"

namespace psi::rt {

namespace cuda {

void CudaKernels::bind(std::size_t arena_bytes, void* blas_workspace, std::size_t blas_workspace_bytes) {
  gemm_.bind_workspace(blas_workspace, blas_workspace_bytes);
  arena_bytes_ = arena_bytes;
  bound_ = true;
}

void CudaKernels::copy(const KernelContext& k, const DeviceRegion& dst, const DeviceRegion& src,
                       std::uint64_t bytes) const {
  check_region(src, bytes, "copy source");
  check_region(dst, bytes, "copy destination");
  if (bytes == 0) return;
  check_cuda(cudaMemcpyAsync(k.arena_base + dst.offset, k.arena_base + src.offset, bytes, cudaMemcpyDeviceToDevice,
                             stream_of(k)),
             "cudaMemcpyAsync(copy)");
}

void CudaKernels::zero_f32(const KernelContext& k, const MatRef& a) const {
  launch_each("zero_f32", stream_of(k), a.rows, a.cols, FillF32{mat<float>(k, a, "zero_f32"), 0.0f});
}

}  // namespace cuda

std::unique_ptr<CudaOpKernels> make_cuda_op_kernels(const CudaKernelSettings& settings) {
  return std::make_unique<cuda::CudaKernels>(settings);
}

}  // namespace psi::rt
