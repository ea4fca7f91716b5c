// The gemm family's OpKernels (ops/gemm.h): Linear layers and K-split products through
// cuBLASLt (cuda_gemm.cpp), their bias rules and the float32 accumulator's finish as elementwise
// kernels.
#include "engine/backend/cuda/kernel_common.cuh"

namespace psi::rt::cuda {

namespace {

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

}  // namespace

void CudaKernels::linear(const KernelContext& k, const MatRef& x, const MatRef& w, const MatRef* bias, psi::BiasRule rule,
                         const MatRef& y, ops::Product) const {
  if (x.cols != w.cols || y.rows != x.rows || y.cols != w.rows)
    fail("linear: x " + dims(x) + ", w " + dims(w) + ", y " + dims(y));
  const auto X = mat<const u16>(k, x, "linear x");
  const auto W = mat<const u16>(k, w, "linear w");
  const auto Y = mat<u16>(k, y, "linear y");
  const u16* b = bias_row(k, bias, y.cols, "linear");
  GemmCall call{{X.data, X.rows, X.cols, X.ld}, {W.data, W.rows, W.cols, W.ld}, Y.data, Y.ld, false,
                rule == psi::BiasRule::fused_f32 ? b : nullptr, 0.0f, "linear"};
  if (!gemm_.run(k.native_stream, call)) {
    if (!call.bias) fail("linear: cuBLASLt has no algorithm for " + dims(x) + " x " + dims(w) + "^T");
    // PyTorch's unfused path: the bias copied into y, then y = x·wᵀ + 1·y (still one rounding).
    launch_each("linear bias fill", stream_of(k), Y.rows, Y.cols, FillBias{Y, b});
    call.bias = nullptr;
    call.beta = 1.0f;
    call.what = "linear unfused";
    if (!gemm_.run(k.native_stream, call)) fail("linear: cuBLASLt has no algorithm for the unfused path either");
  }
  if (b && rule == psi::BiasRule::after_bf16)
    launch_each("linear bias after bf16", stream_of(k), Y.rows, Y.cols, BiasAfterBf16{Y, b});
}

void CudaKernels::gemm_accumulate(const KernelContext& k, const MatRef& a, const MatRef& w, const MatRef& acc,
                                  ops::Product) const {
  if (a.cols != w.cols || acc.rows != a.rows || acc.cols != w.rows)
    fail("gemm_accumulate: a " + dims(a) + ", w " + dims(w) + ", acc " + dims(acc));
  const auto A = mat<const u16>(k, a, "gemm_accumulate a");
  const auto W = mat<const u16>(k, w, "gemm_accumulate w");
  const auto C = mat<float>(k, acc, "gemm_accumulate acc");
  const GemmCall call{{A.data, A.rows, A.cols, A.ld}, {W.data, W.rows, W.cols, W.ld}, C.data, C.ld, true,
                      nullptr, 1.0f, "accumulate"};
  if (!gemm_.run(k.native_stream, call)) fail("gemm_accumulate: cuBLASLt has no algorithm for " + dims(a) + " x " + dims(w) + "^T");
}

void CudaKernels::finish_linear(const KernelContext& k, const MatRef& acc, const MatRef* bias, const MatRef& y) const {
  if (acc.rows != y.rows || acc.cols != y.cols) fail("finish_linear: acc " + dims(acc) + ", y " + dims(y));
  launch_each("finish_linear", stream_of(k), y.rows, y.cols,
              FinishLinear{mat<const float>(k, acc, "finish_linear acc"), bias_row(k, bias, y.cols, "finish_linear"),
                           mat<u16>(k, y, "finish_linear y")});
}

}  // namespace psi::rt::cuda
