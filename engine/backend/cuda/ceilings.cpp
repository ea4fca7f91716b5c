#include "engine/backend/cuda/ceilings.h"

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <stdexcept>

namespace psi::rt {

namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string("ceilings: ") + what + ": " + cudaGetErrorString(e));
}
void check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) throw std::runtime_error(std::string("ceilings: ") + what + ": cuBLAS status " + std::to_string(int(s)));
}

// Median time in ms of `repeats` timed runs of f on `stream`, after two untimed ones.
template <class F>
double median_ms(cudaStream_t stream, int repeats, F&& f) {
  cudaEvent_t a, b;
  check(cudaEventCreate(&a), "event");
  check(cudaEventCreate(&b), "event");
  for (int i = 0; i < 2; ++i) f();
  std::vector<float> t;
  for (int i = 0; i < repeats; ++i) {
    check(cudaEventRecord(a, stream), "record");
    f();
    check(cudaEventRecord(b, stream), "record");
    check(cudaEventSynchronize(b), "synchronize");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, a, b), "elapsed");
    t.push_back(ms);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(t.begin(), t.end());
  return double(t[t.size() / 2]);
}

}  // namespace

Ceilings measure_cuda_ceilings(int device, int repeats) {
  check(cudaSetDevice(device), "set device");
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, device), "properties");
  Ceilings out;
  out.device = prop.name;
  cudaStream_t s;
  check(cudaStreamCreate(&s), "stream");

  for (std::int64_t mib : {4, 8, 16, 32, 256}) {
    const std::size_t bytes = std::size_t(mib) << 20;
    void *host = nullptr, *dev = nullptr;
    check(cudaMallocHost(&host, bytes), "pinned allocation");
    check(cudaMalloc(&dev, bytes), "device allocation");
    const double h2d = median_ms(s, repeats, [&] { check(cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, s), "h2d"); });
    const double d2h = median_ms(s, repeats, [&] { check(cudaMemcpyAsync(host, dev, bytes, cudaMemcpyDeviceToHost, s), "d2h"); });
    out.copies.push_back({mib, double(bytes) / (h2d * 1e6), double(bytes) / (d2h * 1e6)});
    cudaFree(dev);
    cudaFreeHost(host);
  }

  cublasHandle_t h;
  check(cublasCreate(&h), "cublasCreate");
  check(cublasSetStream(h, s), "cublasSetStream");
  // The block's product shapes (rows x out x in): projections, FFN up/down, the audio FFN.
  const std::int64_t shapes[][3] = {{4928, 4096, 4096}, {4928, 1024, 4096}, {4928, 4096, 1024},
                                    {256, 4096, 4096},  {126, 8192, 2048},  {126, 2048, 8192}};
  for (const auto& sh : shapes) {
    const std::int64_t m = sh[0], n = sh[1], k = sh[2];
    __nv_bfloat16 *x = nullptr, *w = nullptr, *y = nullptr;
    check(cudaMalloc(&x, std::size_t(m * k) * 2), "x");
    check(cudaMalloc(&w, std::size_t(n * k) * 2), "w");
    check(cudaMalloc(&y, std::size_t(m * n) * 2), "y");
    check(cudaMemsetAsync(x, 0, std::size_t(m * k) * 2, s), "memset");
    check(cudaMemsetAsync(w, 0, std::size_t(n * k) * 2, s), "memset");
    const float alpha = 1.0f, beta = 0.0f;
    // Row-major y[m,n] = x[m,k] W[n,k]^T is column-major y^T[n,m] = W[n,k] (as k x n, transposed) x^T.
    const double ms = median_ms(s, repeats, [&] {
      check(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, int(n), int(m), int(k), &alpha, w, CUDA_R_16BF, int(k), x,
                         CUDA_R_16BF, int(k), &beta, y, CUDA_R_16BF, int(n), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
            "cublasGemmEx");
    });
    out.gemms.push_back({m, n, k, ms, 2.0 * double(m) * double(n) * double(k) / (ms * 1e9)});
    cudaFree(x);
    cudaFree(w);
    cudaFree(y);
  }
  cublasDestroy(h);
  cudaStreamDestroy(s);
  return out;
}

}  // namespace psi::rt
