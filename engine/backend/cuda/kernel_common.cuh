#pragma once
// What the CUDA OpKernels' family files (gemm.cu, activation.cu, norm.cu, adaln.cu, rope.cu,
// attention.cu; cuda_kernels.cu for the shared part) share: the device matrix view, error
// checks, the one-thread-per-element launcher and the CudaKernels class whose methods they
// define. Included by .cu files only (CUDA syntax).
#include <cuda_runtime.h>

#include <algorithm>
#include <string>
#include <type_traits>

#include "engine/backend/backend.h"
#include "engine/backend/cuda/cuda_gemm.h"
#include "engine/backend/cuda/cuda_kernels.h"
#include "engine/backend/cuda/element_math.h"
#include "engine/error.h"

namespace psi::rt::cuda {

using u16 = std::uint16_t;

// std::min is a host function; device code uses this.
__device__ inline std::int64_t lesser(std::int64_t a, std::int64_t b) { return a < b ? a : b; }

// A row-major matrix in device memory, element (r, c) at data[r·ld + c].
template <class T>
struct Mat {
  T* data = nullptr;
  std::int64_t rows = 0, cols = 0, ld = 0;
  __device__ T& at(std::int64_t r, std::int64_t c) const { return data[r * ld + c]; }
  __device__ T* row(std::int64_t r) const { return data + r * ld; }
};

[[noreturn]] inline void fail(const std::string& msg) { throw Error("cuda kernels: " + msg, Exit::run_failed); }

inline void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) fail(std::string(what) + ": " + cudaGetErrorString(e));
}

// After every launch: a launch-configuration error, or a fault of earlier work, named here.
inline void check_launch(const char* kernel) {
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) fail(std::string("kernel ") + kernel + ": " + cudaGetErrorString(e));
}

inline std::string dims(const MatRef& m) { return std::to_string(m.rows) + "x" + std::to_string(m.cols); }

inline cudaStream_t stream_of(const KernelContext& k) { return static_cast<cudaStream_t>(k.native_stream); }

// ---- elementwise kernels: one thread per element, the element_math.h formula ----------------

// Internal to each .cu: without relocatable device code every file carries its own device copy.
namespace {

constexpr int kEachThreads = 256;

template <class F>
__global__ void each_kernel(std::int64_t rows, std::int64_t cols, F f) {
  const std::int64_t total = rows * cols;
  const std::int64_t stride = std::int64_t(gridDim.x) * blockDim.x;
  for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride)
    f(i / cols, i % cols);
}

template <class F>
void launch_each(const char* name, cudaStream_t s, std::int64_t rows, std::int64_t cols, F f) {
  if (rows <= 0 || cols <= 0) return;
  const std::int64_t blocks = std::min<std::int64_t>((rows * cols + kEachThreads - 1) / kEachThreads, 16384);
  each_kernel<<<unsigned(blocks), kEachThreads, 0, s>>>(rows, cols, f);
  check_launch(name);
}

}  // namespace

struct FillF32 {
  Mat<float> a;
  float value;
  __device__ void operator()(std::int64_t r, std::int64_t c) const { a.at(r, c) = value; }
};

// ---- the OpKernels: every method checks its operands against their regions and the arena,
// then enqueues device work on the kernel context's stream. Each is defined in its family's .cu.

class CudaKernels final : public CudaOpKernels {
 public:
  explicit CudaKernels(const CudaKernelSettings& s) : gemm_(s.blas_workspace_bytes) {}

  const char* name() const override { return "cuda"; }
  void bind(std::size_t arena_bytes, void* blas_workspace, std::size_t blas_workspace_bytes) override;
  CudaGemmSettings gemm_settings() const override { return gemm_.settings(); }

  // cuda_kernels.cu
  void copy(const KernelContext& k, const DeviceRegion& dst, const DeviceRegion& src,
            std::uint64_t bytes) const override;
  void zero_f32(const KernelContext& k, const MatRef& a) const override;
  // gemm.cu
  void linear(const KernelContext& k, const MatRef& x, const MatRef& w, const MatRef* bias, psi::BiasRule rule,
              const MatRef& y, ops::Product) const override;
  void gemm_accumulate(const KernelContext& k, const MatRef& a, const MatRef& w, const MatRef& acc,
                       ops::Product) const override;
  void finish_linear(const KernelContext& k, const MatRef& acc, const MatRef* bias, const MatRef& y) const override;
  // activation.cu
  void gelu_tanh(const KernelContext& k, const MatRef& x) const override;
  // norm.cu
  void rms_norm(const KernelContext& k, const MatRef& x, const MatRef* weight, float eps, const MatRef& y,
                ops::NormKernel) const override;
  // adaln.cu
  void ada_value(const KernelContext& k, const MatRef& table_row, const MatRef& dst) const override;
  void modulate(const KernelContext& k, const MatRef& x, const MatRef& scale, const MatRef& shift,
                const MatRef& y) const override;
  void gated_residual(const KernelContext& k, const MatRef& x, const MatRef& y, const MatRef& g) const override;
  void residual(const KernelContext& k, const MatRef& x, const MatRef& y) const override;
  // rope.cu
  void rope(const KernelContext& k, const MatRef& x, const RopeRef& t) const override;
  // attention.cu
  void attention_gate(const KernelContext& k, const MatRef& z, const MatRef& a, std::int64_t heads,
                      std::int64_t head_dim) const override;
  void sdpa_online_begin(const KernelContext& k, const OnlineRef& s) const override;
  void sdpa_online_update(const KernelContext& k, const MatRef& q, const MatRef& kk, const MatRef& v,
                          std::int64_t heads, const ops::SdpaOptions& opt, const OnlineRef& s) const override;
  void sdpa_online_end(const KernelContext& k, const OnlineRef& s, const MatRef& out) const override;
  void sdpa(const KernelContext& k, const MatRef& q, const MatRef& kk, const MatRef& v, std::int64_t heads,
            const ops::SdpaOptions& opt, const MatRef& out) const override;

 private:
  // The region holds `bytes` from its start and lies inside the arena.
  void check_region(const DeviceRegion& r, std::uint64_t bytes, const std::string& what) const {
    if (!bound_) fail(what + ": the kernels are not bound to an arena yet");
    if (bytes > r.bytes)
      fail(what + " needs " + std::to_string(bytes) + " bytes but " + r.name + " holds " + std::to_string(r.bytes));
    if (r.end() > arena_bytes_ || r.end() < r.offset)
      fail(what + ": region " + r.name + " [" + std::to_string(r.offset) + ", " + std::to_string(r.end()) +
           ") lies outside the " + std::to_string(arena_bytes_) + "-byte arena");
  }

  template <class T>
  Mat<T> mat(const KernelContext& k, const MatRef& m, const std::string& what) const {
    using E = std::remove_const_t<T>;
    if (m.rows < 0 || m.cols < 0 || m.start < 0 || (m.rows > 1 && m.ld < m.cols))
      fail(what + ": a " + dims(m) + " view with row stride " + std::to_string(m.ld) + " at element " +
           std::to_string(m.start));
    check_region(m.region, m.extent() * sizeof(E), what + " (" + dims(m) + ")");
    if (m.region.offset % alignof(E) != 0)
      fail(what + ": region " + m.region.name + " at byte " + std::to_string(m.region.offset) + " is not " +
           std::to_string(alignof(E)) + "-byte aligned");
    return Mat<T>{reinterpret_cast<T*>(k.arena_base + m.region.offset) + m.start, m.rows, m.cols, m.ld};
  }

  // A [1, n] row (bias, weight) or null.
  const u16* bias_row(const KernelContext& k, const MatRef* b, std::int64_t n, const std::string& what) const {
    if (!b) return nullptr;
    if (b->rows < 1 || b->cols != n) fail(what + ": row " + dims(*b) + " for " + std::to_string(n) + " columns");
    return mat<const u16>(k, *b, what).data;
  }

  mutable CudaGemm gemm_;
  std::size_t arena_bytes_ = 0;
  bool bound_ = false;
};

}  // namespace psi::rt::cuda
