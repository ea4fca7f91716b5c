// The CUDA OpKernels: every method checks its operands against their regions and the arena,
// then enqueues device work on the kernel context's stream. Element arithmetic comes from
// element_math.h (explicit IEEE rounding, no contraction); products go to cuBLASLt
// (cuda_gemm.cpp). No device memory is used beyond the arena regions passed in and the
// cuBLASLt workspace: attention keeps its per-(row, head) working set in shared memory.
//
// Orders (so that results can be compared with the CPU backend bit for bit where the formulas
// allow it):
//   - elementwise kernels: one thread per element, the element_math.h formula;
//   - rms_norm: one block per row; thread (chunk, lane) sums its lane of reduce.h's order, and
//     one thread adds the chunks' lane trees in chunk order (the CPU's ordered_sum exactly);
//   - attention: one block per (query row, head); scores are em::score (the CPU's dot order),
//     computed for up to 1,024 keys at a time into shared memory; the running maximum is folded
//     by one thread in key order (std::max's semantics, signed zeros and NaN included); softmax
//     sums are reduce.h lane sums over 1,024-key chunks; each output channel accumulates its
//     keys in key order (online) or in reduce.h's chunked lanes (MATH's P·V GEMM). Scores are
//     recomputed (bit-identically) instead of being stored, so the shared working set does not
//     grow with the key count.
#include "engine/runtime/cuda/cuda_kernels.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <string>
#include <type_traits>

#include "engine/error.h"
#include "engine/runtime/backend.h"
#include "engine/runtime/cuda/cuda_gemm.h"
#include "engine/runtime/cuda/element_math.h"

namespace psi::rt {

namespace {

using u16 = std::uint16_t;
constexpr float kNegInf = -__builtin_huge_valf();
constexpr int kEachThreads = 256;
constexpr int kRowThreads = 256;  // rms_norm: 32 chunks x 8 lanes per pass
constexpr int kAttnThreads = 128;
constexpr std::int64_t kMaxHeadDim = 1024;

// std::min is a host function; device code uses this.
__device__ std::int64_t lesser(std::int64_t a, std::int64_t b) { return a < b ? a : b; }

// A row-major matrix in device memory, element (r, c) at data[r·ld + c].
template <class T>
struct Mat {
  T* data = nullptr;
  std::int64_t rows = 0, cols = 0, ld = 0;
  __device__ T& at(std::int64_t r, std::int64_t c) const { return data[r * ld + c]; }
  __device__ T* row(std::int64_t r) const { return data + r * ld; }
};

[[noreturn]] void fail(const std::string& msg) { throw Error("cuda kernels: " + msg, Exit::run_failed); }

void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) fail(std::string(what) + ": " + cudaGetErrorString(e));
}

// After every launch: a launch-configuration error, or a fault of earlier work, named here.
void check_launch(const char* kernel) {
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) fail(std::string("kernel ") + kernel + ": " + cudaGetErrorString(e));
}

std::string dims(const MatRef& m) { return std::to_string(m.rows) + "x" + std::to_string(m.cols); }

cudaStream_t stream_of(const KernelContext& k) { return static_cast<cudaStream_t>(k.native_stream); }

// ---- elementwise kernels ------------------------------------------------------------------------

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

struct FillF32 {
  Mat<float> a;
  float value;
  __device__ void operator()(std::int64_t r, std::int64_t c) const { a.at(r, c) = value; }
};

struct AdaValue {
  Mat<const u16> table;
  Mat<u16> dst;
  __device__ void operator()(std::int64_t r, std::int64_t c) const {
    dst.at(r, c) = em::ada_value(table.at(0, c), dst.at(r, c));
  }
};

struct Modulate {
  Mat<const u16> x, scale, shift;
  Mat<u16> y;
  __device__ void operator()(std::int64_t r, std::int64_t c) const {
    y.at(r, c) = em::modulate(x.at(r, c), scale.at(scale.rows == 1 ? 0 : r, c), shift.at(shift.rows == 1 ? 0 : r, c));
  }
};

struct GatedResidual {
  Mat<u16> x;
  Mat<const u16> y, g;
  __device__ void operator()(std::int64_t r, std::int64_t c) const {
    x.at(r, c) = em::gated_residual(x.at(r, c), y.at(r, c), g.at(g.rows == 1 ? 0 : r, c));
  }
};

struct Residual {
  Mat<u16> x;
  Mat<const u16> y;
  __device__ void operator()(std::int64_t r, std::int64_t c) const { x.at(r, c) = em::residual(x.at(r, c), y.at(r, c)); }
};

struct FinishLinear {
  Mat<const float> acc;
  const u16* bias;  // null: none
  Mat<u16> y;
  __device__ void operator()(std::int64_t r, std::int64_t c) const {
    y.at(r, c) = bias ? em::finish_fused(acc.at(r, c), bias[c]) : em::finish_plain(acc.at(r, c));
  }
};

struct BiasAfterBf16 {
  Mat<u16> y;
  const u16* bias;
  __device__ void operator()(std::int64_t r, std::int64_t c) const { y.at(r, c) = em::bias_after_bf16(y.at(r, c), bias[c]); }
};

// The unfused Linear path's first step: y = bias broadcast over rows (the product then adds to it).
struct FillBias {
  Mat<u16> y;
  const u16* bias;
  __device__ void operator()(std::int64_t r, std::int64_t c) const { y.at(r, c) = bias[c]; }
};

struct Gelu {
  Mat<u16> x;
  __device__ void operator()(std::int64_t r, std::int64_t c) const { x.at(r, c) = em::gelu_tanh(x.at(r, c)); }
};

struct Sigmoid {
  Mat<u16> z;
  __device__ void operator()(std::int64_t r, std::int64_t c) const { z.at(r, c) = em::sigmoid(z.at(r, c)); }
};

struct Gate {
  Mat<u16> a;  // the first heads·head_dim columns
  Mat<const u16> z;
  std::int64_t head_dim;
  __device__ void operator()(std::int64_t r, std::int64_t c) const {
    a.at(r, c) = em::gate_apply(a.at(r, c), em::gate_factor(z.at(r, c / head_dim)));
  }
};

// One (row, pair) per element: pair p = h·half + j of x [rows, heads·2·half].
struct Rope {
  Mat<u16> x;
  const u16* cos;
  const u16* sin;
  std::int64_t rows, half;
  __device__ void operator()(std::int64_t r, std::int64_t p) const {
    const std::int64_t h = p / half, j = p % half;
    u16* x1 = x.row(r) + h * 2 * half + j;
    u16* x2 = x1 + half;
    const std::int64_t t = (h * rows + r) * half + j;
    const em::RopePair y = em::rope_pair(*x1, *x2, cos[t], sin[t]);
    *x1 = y.y1;
    *x2 = y.y2;
  }
};

struct OnlineEnd {
  Mat<const float> l, o;
  Mat<u16> out;
  std::int64_t d;
  __device__ void operator()(std::int64_t r, std::int64_t c) const {
    const float lv = l.at(r, c / d);
    out.at(r, c) = lv == 0.0f ? u16(0) : em::round_bf16(em::div(o.at(r, c), lv));
  }
};

// ---- rms_norm -------------------------------------------------------------------------------------

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

// ---- attention ------------------------------------------------------------------------------------

struct AttnShared {
  float q[kMaxHeadDim];  // the scaled query head
  float o[kMaxHeadDim];  // the float32 accumulator
  float p[em::kChunk];   // scores, then probabilities, of up to 1,024 keys
  float lanes[em::kLanes];
  float m, l, m_new, alpha;
};

// Scores of keys [j0, j0 + n) (n ≤ 1,024) into sh.p.
__device__ void scores(AttnShared& sh, const Mat<const u16>& k, std::int64_t j0, std::int64_t n, std::int64_t col0,
                       std::int64_t d, float factor) {
  for (std::int64_t j = threadIdx.x; j < n; j += blockDim.x) sh.p[j] = em::score(sh.q, k.row(j0 + j) + col0, factor, d);
}

__device__ void load_query(AttnShared& sh, const Mat<const u16>& q, std::int64_t i, std::int64_t col0, std::int64_t d,
                           float factor) {
  for (std::int64_t c = threadIdx.x; c < d; c += blockDim.x) sh.q[c] = em::mul(em::widen(q.at(i, col0 + c)), factor);
}

// ops' online form for one (query row, head) over keys k, v in tiles of key_tile. With a state
// (m.data set) it continues and stores it (sdpa_online_update); without one it starts from
// (−∞, 0, 0) and writes bf(o / l) to out (ops::sdpa's online form).
__global__ void online_kernel(Mat<const u16> q, Mat<const u16> k, Mat<const u16> v, std::int64_t d, float factor,
                              std::int64_t key_tile, bool p_bf16, Mat<float> m, Mat<float> l, Mat<float> o, Mat<u16> out) {
  __shared__ AttnShared sh;
  const std::int64_t i = blockIdx.x, h = blockIdx.y, col0 = h * d, nk = k.rows;
  load_query(sh, q, i, col0, d, factor);
  for (std::int64_t c = threadIdx.x; c < d; c += blockDim.x) sh.o[c] = m.data ? o.at(i, col0 + c) : 0.0f;
  if (threadIdx.x == 0) {
    sh.m = m.data ? m.at(i, h) : kNegInf;
    sh.l = m.data ? l.at(i, h) : 0.0f;
  }
  __syncthreads();
  for (std::int64_t j0 = 0; j0 < nk; j0 += key_tile) {
    const std::int64_t nt = lesser(key_tile, nk - j0);
    // The tile's maximum, folded in key order.
    float tile_max = kNegInf;
    for (std::int64_t c0 = 0; c0 < nt; c0 += em::kChunk) {
      const std::int64_t cn = lesser(em::kChunk, nt - c0);
      scores(sh, k, j0 + c0, cn, col0, d, factor);
      __syncthreads();
      if (threadIdx.x == 0)
        for (std::int64_t j = 0; j < cn; ++j) tile_max = em::fold_max(tile_max, sh.p[j]);
      __syncthreads();
    }
    if (threadIdx.x == 0) {
      sh.m_new = em::fold_max(sh.m, tile_max);
      sh.alpha = em::exp_f32(em::sub(sh.m, sh.m_new));
    }
    __syncthreads();
    const float m_new = sh.m_new, alpha = sh.alpha;
    if (m_new == kNegInf) continue;  // every key so far is masked (all threads agree)
    if (alpha != 1.0f)
      for (std::int64_t c = threadIdx.x; c < d; c += blockDim.x) sh.o[c] = em::mul(sh.o[c], alpha);
    float tile_sum = 0.0f;  // thread 0's
    for (std::int64_t c0 = 0; c0 < nt; c0 += em::kChunk) {
      const std::int64_t cn = lesser(em::kChunk, nt - c0);
      scores(sh, k, j0 + c0, cn, col0, d, factor);
      __syncthreads();
      for (std::int64_t j = threadIdx.x; j < cn; j += blockDim.x) sh.p[j] = em::exp_f32(em::sub(sh.p[j], m_new));
      __syncthreads();
      if (threadIdx.x < em::kLanes) sh.lanes[threadIdx.x] = em::lane_sum(sh.p, cn, int(threadIdx.x));
      // Each channel adds its keys in key order: o += P_j · v_j.
      for (std::int64_t c = threadIdx.x; c < d; c += blockDim.x) {
        float acc = sh.o[c];
        for (std::int64_t j = 0; j < cn; ++j) {
          const float pj = p_bf16 ? em::bf(sh.p[j]) : sh.p[j];
          acc = em::add(acc, em::mul(pj, em::widen(v.at(j0 + c0 + j, col0 + c))));
        }
        sh.o[c] = acc;
      }
      __syncthreads();
      if (threadIdx.x == 0) tile_sum = em::add(tile_sum, em::lane_tree(sh.lanes));
      __syncthreads();
    }
    if (threadIdx.x == 0) {
      sh.l = em::add(em::mul(sh.l, alpha), tile_sum);
      sh.m = m_new;
    }
    __syncthreads();
  }
  if (m.data) {
    for (std::int64_t c = threadIdx.x; c < d; c += blockDim.x) o.at(i, col0 + c) = sh.o[c];
    if (threadIdx.x == 0) {
      m.at(i, h) = sh.m;
      l.at(i, h) = sh.l;
    }
  } else {
    const float lv = sh.l;
    for (std::int64_t c = threadIdx.x; c < d; c += blockDim.x)
      out.at(i, col0 + c) = lv == 0.0f ? u16(0) : em::round_bf16(em::div(sh.o[c], lv));
  }
}

// ops' MATH form for one (query row, head): the maximum, the softmax sum in reduce.h's order,
// then P·V with each channel's keys in reduce.h's chunked lanes, one BF16 write.
__global__ void math_kernel(Mat<const u16> q, Mat<const u16> k, Mat<const u16> v, std::int64_t d, float factor,
                            Mat<u16> out) {
  __shared__ AttnShared sh;
  const std::int64_t i = blockIdx.x, h = blockIdx.y, col0 = h * d, nk = k.rows;
  load_query(sh, q, i, col0, d, factor);
  __syncthreads();
  float mx = kNegInf;  // thread 0's
  for (std::int64_t c0 = 0; c0 < nk; c0 += em::kChunk) {
    const std::int64_t cn = lesser(em::kChunk, nk - c0);
    scores(sh, k, c0, cn, col0, d, factor);
    __syncthreads();
    if (threadIdx.x == 0)
      for (std::int64_t j = 0; j < cn; ++j) mx = em::fold_max(mx, sh.p[j]);
    __syncthreads();
  }
  if (threadIdx.x == 0) sh.m = mx;
  __syncthreads();
  const float m = sh.m;
  if (m == kNegInf) {  // safe softmax: a row that attends to nothing writes zeros
    for (std::int64_t c = threadIdx.x; c < d; c += blockDim.x) out.at(i, col0 + c) = 0;
    return;
  }
  float total = 0.0f;  // thread 0's
  for (std::int64_t c0 = 0; c0 < nk; c0 += em::kChunk) {
    const std::int64_t cn = lesser(em::kChunk, nk - c0);
    scores(sh, k, c0, cn, col0, d, factor);
    __syncthreads();
    for (std::int64_t j = threadIdx.x; j < cn; j += blockDim.x) sh.p[j] = em::exp_f32(em::sub(sh.p[j], m));
    __syncthreads();
    if (threadIdx.x < em::kLanes) sh.lanes[threadIdx.x] = em::lane_sum(sh.p, cn, int(threadIdx.x));
    __syncthreads();
    if (threadIdx.x == 0) total = em::add(total, em::lane_tree(sh.lanes));
    __syncthreads();
  }
  if (threadIdx.x == 0) sh.l = total;
  for (std::int64_t c = threadIdx.x; c < d; c += blockDim.x) sh.o[c] = 0.0f;
  __syncthreads();
  const float l = sh.l;
  for (std::int64_t c0 = 0; c0 < nk; c0 += em::kChunk) {
    const std::int64_t cn = lesser(em::kChunk, nk - c0);
    scores(sh, k, c0, cn, col0, d, factor);
    __syncthreads();
    for (std::int64_t j = threadIdx.x; j < cn; j += blockDim.x)
      sh.p[j] = em::div(em::exp_f32(em::sub(sh.p[j], m)), l);
    __syncthreads();
    for (std::int64_t c = threadIdx.x; c < d; c += blockDim.x) {
      float lane[em::kLanes] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
      for (std::int64_t j = 0; j < cn; ++j)
        lane[j % em::kLanes] = em::add(lane[j % em::kLanes], em::mul(sh.p[j], em::widen(v.at(c0 + j, col0 + c))));
      sh.o[c] = em::add(sh.o[c], em::lane_tree(lane));
    }
    __syncthreads();
  }
  for (std::int64_t c = threadIdx.x; c < d; c += blockDim.x) out.at(i, col0 + c) = em::round_bf16(sh.o[c]);
}

// ---- the OpKernels ----------------------------------------------------------------------------------

class CudaKernels final : public CudaOpKernels {
 public:
  explicit CudaKernels(const CudaKernelSettings& s) : gemm_(s.blas_workspace_bytes) {}

  const char* name() const override { return "cuda"; }

  void bind(std::size_t arena_bytes, void* blas_workspace, std::size_t blas_workspace_bytes) override {
    gemm_.bind_workspace(blas_workspace, blas_workspace_bytes);
    arena_bytes_ = arena_bytes;
    bound_ = true;
  }

  CudaGemmSettings gemm_settings() const override { return gemm_.settings(); }

  void copy(const KernelContext& k, const DeviceRegion& dst, const DeviceRegion& src,
            std::uint64_t bytes) const override {
    check_region(src, bytes, "copy source");
    check_region(dst, bytes, "copy destination");
    if (bytes == 0) return;
    check_cuda(cudaMemcpyAsync(k.arena_base + dst.offset, k.arena_base + src.offset, bytes, cudaMemcpyDeviceToDevice,
                               stream_of(k)),
               "cudaMemcpyAsync(copy)");
  }

  void zero_f32(const KernelContext& k, const MatRef& a) const override {
    launch_each("zero_f32", stream_of(k), a.rows, a.cols, FillF32{mat<float>(k, a, "zero_f32"), 0.0f});
  }

  void linear(const KernelContext& k, const MatRef& x, const MatRef& w, const MatRef* bias, ops::BiasRule rule,
              const MatRef& y, ops::Product) const override {
    if (x.cols != w.cols || y.rows != x.rows || y.cols != w.rows)
      fail("linear: x " + dims(x) + ", w " + dims(w) + ", y " + dims(y));
    const auto X = mat<const u16>(k, x, "linear x");
    const auto W = mat<const u16>(k, w, "linear w");
    const auto Y = mat<u16>(k, y, "linear y");
    const u16* b = bias_row(k, bias, y.cols, "linear");
    cuda::GemmCall call{{X.data, X.rows, X.cols, X.ld}, {W.data, W.rows, W.cols, W.ld}, Y.data, Y.ld, false,
                        rule == ops::BiasRule::fused_f32 ? b : nullptr, 0.0f, "linear"};
    if (!gemm_.run(k.native_stream, call)) {
      if (!call.bias) fail("linear: cuBLASLt has no algorithm for " + dims(x) + " x " + dims(w) + "^T");
      // PyTorch's unfused path: the bias copied into y, then y = x·wᵀ + 1·y (still one rounding).
      launch_each("linear bias fill", stream_of(k), Y.rows, Y.cols, FillBias{Y, b});
      call.bias = nullptr;
      call.beta = 1.0f;
      call.what = "linear unfused";
      if (!gemm_.run(k.native_stream, call)) fail("linear: cuBLASLt has no algorithm for the unfused path either");
    }
    if (b && rule == ops::BiasRule::after_bf16)
      launch_each("linear bias after bf16", stream_of(k), Y.rows, Y.cols, BiasAfterBf16{Y, b});
  }

  void gelu_tanh(const KernelContext& k, const MatRef& x) const override {
    launch_each("gelu_tanh", stream_of(k), x.rows, x.cols, Gelu{mat<u16>(k, x, "gelu_tanh")});
  }

  void gemm_accumulate(const KernelContext& k, const MatRef& a, const MatRef& w, const MatRef& acc,
                       ops::Product) const override {
    if (a.cols != w.cols || acc.rows != a.rows || acc.cols != w.rows)
      fail("gemm_accumulate: a " + dims(a) + ", w " + dims(w) + ", acc " + dims(acc));
    const auto A = mat<const u16>(k, a, "gemm_accumulate a");
    const auto W = mat<const u16>(k, w, "gemm_accumulate w");
    const auto C = mat<float>(k, acc, "gemm_accumulate acc");
    const cuda::GemmCall call{{A.data, A.rows, A.cols, A.ld}, {W.data, W.rows, W.cols, W.ld}, C.data, C.ld, true,
                              nullptr, 1.0f, "accumulate"};
    if (!gemm_.run(k.native_stream, call)) fail("gemm_accumulate: cuBLASLt has no algorithm for " + dims(a) + " x " + dims(w) + "^T");
  }

  void finish_linear(const KernelContext& k, const MatRef& acc, const MatRef* bias, const MatRef& y) const override {
    if (acc.rows != y.rows || acc.cols != y.cols) fail("finish_linear: acc " + dims(acc) + ", y " + dims(y));
    launch_each("finish_linear", stream_of(k), y.rows, y.cols,
                FinishLinear{mat<const float>(k, acc, "finish_linear acc"), bias_row(k, bias, y.cols, "finish_linear"),
                             mat<u16>(k, y, "finish_linear y")});
  }

  void rms_norm(const KernelContext& k, const MatRef& x, const MatRef* weight, float eps,
                const MatRef& y, ops::NormKernel) const override {
    if (x.rows != y.rows || x.cols != y.cols) fail("rms_norm: x " + dims(x) + ", y " + dims(y));
    const auto X = mat<const u16>(k, x, "rms_norm x");
    const auto Y = mat<u16>(k, y, "rms_norm y");
    const u16* w = bias_row(k, weight, x.cols, "rms_norm weight");
    if (x.rows <= 0 || x.cols <= 0) return;
    rms_norm_kernel<<<unsigned(x.rows), kRowThreads, 0, stream_of(k)>>>(X, w, eps, Y);
    check_launch("rms_norm");
  }

  void ada_value(const KernelContext& k, const MatRef& table_row, const MatRef& dst) const override {
    if (table_row.rows < 1 || table_row.cols != dst.cols)
      fail("ada_value: table row " + dims(table_row) + " for values " + dims(dst));
    launch_each("ada_value", stream_of(k), dst.rows, dst.cols,
                AdaValue{mat<const u16>(k, table_row, "ada_value table"), mat<u16>(k, dst, "ada_value dst")});
  }

  void modulate(const KernelContext& k, const MatRef& x, const MatRef& scale, const MatRef& shift,
                const MatRef& y) const override {
    check_mod(scale, x, "modulate scale");
    check_mod(shift, x, "modulate shift");
    if (y.rows != x.rows || y.cols != x.cols) fail("modulate: x " + dims(x) + ", y " + dims(y));
    launch_each("modulate", stream_of(k), x.rows, x.cols,
                Modulate{mat<const u16>(k, x, "modulate x"), mat<const u16>(k, scale, "modulate scale"),
                         mat<const u16>(k, shift, "modulate shift"), mat<u16>(k, y, "modulate y")});
  }

  void gated_residual(const KernelContext& k, const MatRef& x, const MatRef& y, const MatRef& g) const override {
    if (y.rows != x.rows || y.cols != x.cols) fail("gated_residual: update " + dims(y) + " for state " + dims(x));
    check_mod(g, x, "gated_residual gate");
    launch_each("gated_residual", stream_of(k), x.rows, x.cols,
                GatedResidual{mat<u16>(k, x, "gated_residual x"), mat<const u16>(k, y, "gated_residual y"),
                              mat<const u16>(k, g, "gated_residual g")});
  }

  void residual(const KernelContext& k, const MatRef& x, const MatRef& y) const override {
    if (y.rows != x.rows || y.cols != x.cols) fail("residual: update " + dims(y) + " for state " + dims(x));
    launch_each("residual", stream_of(k), x.rows, x.cols,
                Residual{mat<u16>(k, x, "residual x"), mat<const u16>(k, y, "residual y")});
  }

  void attention_gate(const KernelContext& k, const MatRef& z, const MatRef& a, std::int64_t heads,
                      std::int64_t head_dim) const override {
    if (heads < 0 || head_dim <= 0 || z.rows != a.rows || z.cols < heads || a.cols < heads * head_dim)
      fail("attention_gate: gate " + dims(z) + ", values " + dims(a) + " for " + std::to_string(heads) + " heads of " +
           std::to_string(head_dim));
    const auto Z = mat<u16>(k, z, "attention_gate z");
    const auto A = mat<u16>(k, a, "attention_gate a");
    launch_each("attention_gate sigmoid", stream_of(k), Z.rows, Z.cols, Sigmoid{Z});
    launch_each("attention_gate multiply", stream_of(k), A.rows, heads * head_dim,
                Gate{A, Mat<const u16>{Z.data, Z.rows, Z.cols, Z.ld}, head_dim});
  }

  void rope(const KernelContext& k, const MatRef& x, const RopeRef& t) const override {
    if (t.heads <= 0 || t.half <= 0 || t.rows != x.rows || x.cols != t.heads * 2 * t.half)
      fail("rope: tables [" + std::to_string(t.heads) + " heads, " + std::to_string(t.rows) + " tokens, " +
           std::to_string(t.half) + "] for an input " + dims(x));
    const std::uint64_t table_bytes = std::uint64_t(t.heads * t.rows * t.half) * 2;
    check_region(t.cos, table_bytes, "rope cos table");
    check_region(t.sin, table_bytes, "rope sin table");
    launch_each("rope", stream_of(k), x.rows, t.heads * t.half,
                Rope{mat<u16>(k, x, "rope x"), reinterpret_cast<const u16*>(k.arena_base + t.cos.offset),
                     reinterpret_cast<const u16*>(k.arena_base + t.sin.offset), t.rows, t.half});
  }

  void sdpa_online_begin(const KernelContext& k, const OnlineRef& s) const override {
    if (s.l.rows != s.m.rows || s.l.cols != s.m.cols || s.o.rows != s.m.rows)
      fail("sdpa_online_begin: m " + dims(s.m) + ", l " + dims(s.l) + ", o " + dims(s.o));
    const cudaStream_t st = stream_of(k);
    launch_each("sdpa_online_begin m", st, s.m.rows, s.m.cols, FillF32{mat<float>(k, s.m, "online m"), kNegInf});
    launch_each("sdpa_online_begin l", st, s.l.rows, s.l.cols, FillF32{mat<float>(k, s.l, "online l"), 0.0f});
    launch_each("sdpa_online_begin o", st, s.o.rows, s.o.cols, FillF32{mat<float>(k, s.o, "online o"), 0.0f});
  }

  void sdpa_online_update(const KernelContext& k, const MatRef& q, const MatRef& kk, const MatRef& v,
                          std::int64_t heads, const ops::SdpaOptions& opt, const OnlineRef& s) const override {
    const std::int64_t d = head_width(q, kk, v, heads, opt, "sdpa_online_update");
    if (opt.key_tile <= 0) fail("sdpa_online_update: key tile " + std::to_string(opt.key_tile) + " must be positive");
    check_state(s, q.rows, heads, q.cols, "sdpa_online_update");
    if (q.rows == 0 || kk.rows == 0) return;
    online_kernel<<<dim3(unsigned(q.rows), unsigned(heads)), kAttnThreads, 0, stream_of(k)>>>(
        mat<const u16>(k, q, "online q"), mat<const u16>(k, kk, "online k"), mat<const u16>(k, v, "online v"), d,
        em::qk_factor(d), opt.key_tile, opt.p_bf16, mat<float>(k, s.m, "online m"), mat<float>(k, s.l, "online l"),
        mat<float>(k, s.o, "online o"), Mat<u16>{});
    check_launch("sdpa_online_update");
  }

  void sdpa_online_end(const KernelContext& k, const OnlineRef& s, const MatRef& out) const override {
    const std::int64_t heads = s.m.cols;
    if (out.rows != s.o.rows || out.cols != s.o.cols || heads <= 0 || s.o.cols % heads != 0 || s.l.rows != s.o.rows ||
        s.l.cols != heads)
      fail("sdpa_online_end: output " + dims(out) + " for a state o " + dims(s.o) + ", l " + dims(s.l));
    launch_each("sdpa_online_end", stream_of(k), out.rows, out.cols,
                OnlineEnd{mat<const float>(k, s.l, "online l"), mat<const float>(k, s.o, "online o"),
                          mat<u16>(k, out, "online out"), s.o.cols / heads});
  }

  void sdpa(const KernelContext& k, const MatRef& q, const MatRef& kk, const MatRef& v, std::int64_t heads,
            const ops::SdpaOptions& opt, const MatRef& out) const override {
    const std::int64_t d = head_width(q, kk, v, heads, opt, "sdpa");
    if (out.rows != q.rows || out.cols != q.cols) fail("sdpa: output " + dims(out) + " for queries " + dims(q));
    if (q.rows == 0) return;
    const auto Q = mat<const u16>(k, q, "sdpa q");
    const auto K = mat<const u16>(k, kk, "sdpa k");
    const auto V = mat<const u16>(k, v, "sdpa v");
    const auto O = mat<u16>(k, out, "sdpa out");
    const dim3 grid(unsigned(q.rows), unsigned(heads));
    if (opt.form == ops::SoftmaxForm::online) {
      if (opt.key_tile <= 0) fail("sdpa: key tile " + std::to_string(opt.key_tile) + " must be positive");
      online_kernel<<<grid, kAttnThreads, 0, stream_of(k)>>>(Q, K, V, d, em::qk_factor(d), opt.key_tile,
                                                               opt.p_bf16, Mat<float>{}, Mat<float>{}, Mat<float>{}, O);
      check_launch("sdpa (online)");
    } else {
      math_kernel<<<grid, kAttnThreads, 0, stream_of(k)>>>(Q, K, V, d, em::qk_factor(d), O);
      check_launch("sdpa (math)");
    }
  }

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

  static void check_mod(const MatRef& m, const MatRef& x, const char* what) {
    if (m.cols != x.cols || (m.rows != 1 && m.rows != x.rows))
      fail(std::string(what) + ": modulation " + dims(m) + " for an input " + dims(x));
  }

  static std::int64_t head_width(const MatRef& q, const MatRef& k, const MatRef& v, std::int64_t heads,
                                 const ops::SdpaOptions& opt, const char* what) {
    if (opt.mask) fail(std::string(what) + ": an additive mask is not supported by the CUDA kernels");
    if (heads <= 0 || q.cols % heads != 0)
      fail(std::string(what) + ": width " + std::to_string(q.cols) + " does not split into " + std::to_string(heads) +
           " heads");
    if (k.cols != q.cols || v.cols != q.cols || v.rows != k.rows)
      fail(std::string(what) + ": q " + dims(q) + ", k " + dims(k) + ", v " + dims(v));
    const std::int64_t d = q.cols / heads;
    if (d % em::kLanes != 0 || d > kMaxHeadDim)
      fail(std::string(what) + ": head width " + std::to_string(d) + " must be a multiple of 8 and at most 1024");
    if (heads > 65535) fail(std::string(what) + ": " + std::to_string(heads) + " heads exceed the grid");
    return d;
  }

  static void check_state(const OnlineRef& s, std::int64_t rows, std::int64_t heads, std::int64_t width,
                          const char* what) {
    if (s.m.rows != rows || s.m.cols != heads || s.l.rows != rows || s.l.cols != heads || s.o.rows != rows ||
        s.o.cols != width)
      fail(std::string(what) + ": state m " + dims(s.m) + ", l " + dims(s.l) + ", o " + dims(s.o) + " for " +
           std::to_string(rows) + " rows of " + std::to_string(heads) + " heads, width " + std::to_string(width));
  }

  mutable cuda::CudaGemm gemm_;
  std::size_t arena_bytes_ = 0;
  bool bound_ = false;
};

}  // namespace

std::unique_ptr<CudaOpKernels> make_cuda_op_kernels(const CudaKernelSettings& settings) {
  return std::make_unique<CudaKernels>(settings);
}

}  // namespace psi::rt
