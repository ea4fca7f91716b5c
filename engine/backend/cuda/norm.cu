// The norm family's OpKernels (ops/norm.h). rms_norm: one block per row; thread (chunk, lane)
// sums its lane of reduce.h's order, and one thread adds the chunks' lane trees in chunk order
// (the CPU's ordered_sum exactly).
#include "engine/backend/cuda/kernel_common.cuh"

namespace psi::rt::cuda {

namespace {

constexpr int kRowThreads = 256;  // 32 chunks x 8 lanes per pass

__global__ void rms_norm_kernel(Mat<const u16> x, const u16* w, float eps, Mat<u16> y) {
  constexpr int kChunksPerPass = kRowThreads / em::kLanes;
  __shared__ float lanes[kRowThreads];
  __shared__ float rstd;
  const std::int64_t r = blockIdx.x, n = x.cols;
  const u16* row = x.row(r);
  const std::int64_t chunks = (n + em::kChunk - 1) / em::kChunk;
  float total = 0.0f;  // thread 0's running sum over chunks
  for (std::int64_t g = 0; g < chunks; g += kChunksPerPass) {
    const std::int64_t chunk = g + threadIdx.x / em::kLanes;
    const std::int64_t c0 = chunk * em::kChunk;
    lanes[threadIdx.x] =
        chunk < chunks ? em::lane_sum_squares(row, c0, lesser(c0 + em::kChunk, n), int(threadIdx.x % em::kLanes)) : 0.0f;
    __syncthreads();
    if (threadIdx.x == 0)
      for (std::int64_t q = 0; q < lesser(kChunksPerPass, chunks - g); ++q)
        total = em::add(total, em::lane_tree(lanes + q * em::kLanes));
    __syncthreads();
  }
  if (threadIdx.x == 0) rstd = em::rms_rstd(total, n, eps);
  __syncthreads();
  u16* out = y.row(r);
  for (std::int64_t c = threadIdx.x; c < n; c += blockDim.x)
    out[c] = w ? em::rms_scale_weighted(row[c], w[c], rstd) : em::rms_scale(row[c], rstd);
}

}  // namespace

void CudaKernels::rms_norm(const KernelContext& k, const MatRef& x, const MatRef* weight, float eps,
                           const MatRef& y, ops::NormKernel) const {
  if (x.rows != y.rows || x.cols != y.cols) fail("rms_norm: x " + dims(x) + ", y " + dims(y));
  const auto X = mat<const u16>(k, x, "rms_norm x");
  const auto Y = mat<u16>(k, y, "rms_norm y");
  const u16* w = bias_row(k, weight, x.cols, "rms_norm weight");
  if (x.rows <= 0 || x.cols <= 0) return;
  rms_norm_kernel<<<unsigned(x.rows), kRowThreads, 0, stream_of(k)>>>(X, w, eps, Y);
  check_launch("rms_norm");
}

}  // namespace psi::rt::cuda
