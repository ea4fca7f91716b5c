// cuBLASLt products set up as PyTorch 2.11 sets up a BF16 Linear on CUDA. What PyTorch does
// (aten/src/ATen/native/cuda/Blas.cpp, addmm_out_cuda_impl; aten/src/ATen/cuda/CUDABlas.cpp,
// gemm_and_bias; aten/src/ATen/cuda/CublasHandlePool.cpp):
//   - F.linear(x, W, b) is addmm(b, x, Wᵀ); with a 1-D bias, a row-major 2-D result and every
//     dimension > 1 it takes the cuBLASLt path with the bias in the epilogue; if cuBLASLt
//     reports no algorithm or fails, it recomputes through the unfused path (the bias copied
//     into the result, then a product with beta = 1).
//   - The row-major result [M, N] is cuBLAS's column-major [N, M]: m = N (out features),
//     n = M (rows), k = K; A = W with transa = T and lda = W's row stride, B = x with
//     transb = N and ldb = x's row stride, C = D = y with ldc = y's row stride.
//   - Matmul descriptor: CUBLAS_COMPUTE_32F with scale type CUDA_R_32F, A/B/C CUDA_R_16BF,
//     alpha = 1, beta = 0, CUBLASLT_EPILOGUE_BIAS with the bias pointer (the bias type is left
//     at its default, the output type: BF16), CUBLASLT_EPILOGUE_DEFAULT without a bias.
//   - Preference: CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = the cuBLASLt workspace size;
//     MIN_ALIGNMENT_{A,B,C}_BYTES = the largest power of two up to 256 dividing each pointer,
//     and MIN_ALIGNMENT_D_BYTES from the bias pointer; no REDUCTION_SCHEME_MASK while BF16
//     reduced-precision reductions are allowed (torch's default), so every reduction scheme
//     (split-K included) stays open to the heuristic.
//   - cublasLtMatmulAlgoGetHeuristic asked for 1 algorithm, C's layout passed as D's.
// psi differs in one point: D's alignment is the smaller of the output's and the bias's (the
// output IS D; a column block of a wider matrix can be less aligned than the bias, and claiming
// the bias's alignment for it could select a kernel that needs more).
#include "engine/backend/cuda/cuda_gemm.h"

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <sstream>

#include "engine/error.h"

namespace psi::rt::cuda {

namespace {

void check(cublasStatus_t s, const std::string& what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw Error("cuBLASLt: " + what + " failed: " + cublasGetStatusString(s), Exit::run_failed);
}

// The largest power of two up to 256 that divides the address (PyTorch's _getAlignment).
std::uint32_t alignment_of(const void* p) {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  std::uint32_t al = 256;
  while (al > 1 && a % al != 0) al /= 2;
  return al;
}

std::string version_string() {
  const std::size_t v = cublasLtGetVersion();
  return "cuBLASLt " + std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
}

template <class T>
T algo_attr(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoConfigAttributes_t attr, const char* name) {
  T v{};
  std::size_t written = 0;
  check(cublasLtMatmulAlgoConfigGetAttribute(&algo, attr, &v, sizeof v, &written),
        std::string("cublasLtMatmulAlgoConfigGetAttribute(") + name + ")");
  return v;
}

}  // namespace

struct CudaGemm::Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulHeuristicResult_t heuristic{};
  bool available = false;
  CudaGemmAlgo record;

  ~Plan() {
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (desc) cublasLtMatmulDescDestroy(desc);
  }
};

CudaGemm::CudaGemm(std::size_t workspace_bytes) : workspace_bytes_(workspace_bytes) {
  cublasLtHandle_t h = nullptr;
  check(cublasLtCreate(&h), "cublasLtCreate");
  handle_ = h;
}

CudaGemm::~CudaGemm() {
  plans_.clear();
  if (handle_) cublasLtDestroy(static_cast<cublasLtHandle_t>(handle_));
}

void CudaGemm::bind_workspace(void* workspace, std::size_t bytes) {
  if (bytes < workspace_bytes_)
    throw Error("cuBLASLt: workspace of " + std::to_string(bytes) + " bytes bound, " +
                    std::to_string(workspace_bytes_) + " needed",
                Exit::run_failed);
  std::lock_guard<std::mutex> lock(mutex_);
  workspace_ = workspace;
}

CudaGemm::Plan& CudaGemm::plan_for(const GemmCall& call) {
  const std::int64_t m = call.w.rows, n = call.x.rows, k = call.x.cols;
  const std::uint32_t al_a = alignment_of(call.w.data), al_b = alignment_of(call.x.data), al_c = alignment_of(call.out);
  const std::uint32_t al_d = call.bias ? std::min(al_c, alignment_of(call.bias)) : al_c;
  std::ostringstream key;
  key << call.what << " m=" << m << " n=" << n << " k=" << k << " lda=" << call.w.ld << " ldb=" << call.x.ld
      << " ldc=" << call.out_ld << " out=" << (call.out_f32 ? "f32" : "bf16")
      << " epilogue=" << (call.bias ? "bias" : "default") << " beta=" << call.beta << " align=" << al_a << "/" << al_b
      << "/" << al_c << "/" << al_d;
  auto it = plans_.find(key.str());
  if (it != plans_.end()) return *it->second;

  auto p = std::make_unique<Plan>();
  p->record.problem = key.str();
  const std::string what = p->record.problem;
  const cudaDataType_t out_type = call.out_f32 ? CUDA_R_32F : CUDA_R_16BF;
  check(cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate (" + what + ")");
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  check(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta), "TRANSA (" + what + ")");
  check(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb), "TRANSB (" + what + ")");
  const cublasLtEpilogue_t epilogue = call.bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
  check(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue),
        "EPILOGUE (" + what + ")");
  if (call.bias)
    check(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &call.bias, sizeof call.bias),
          "BIAS_POINTER (" + what + ")");
  // A is W stored [N, K] row-major = column-major k x m, transposed by the operation.
  check(cublasLtMatrixLayoutCreate(&p->a, CUDA_R_16BF, std::uint64_t(k), std::uint64_t(m), call.w.ld),
        "A layout (" + what + ")");
  check(cublasLtMatrixLayoutCreate(&p->b, CUDA_R_16BF, std::uint64_t(k), std::uint64_t(n), call.x.ld),
        "B layout (" + what + ")");
  check(cublasLtMatrixLayoutCreate(&p->c, out_type, std::uint64_t(m), std::uint64_t(n), call.out_ld),
        "C layout (" + what + ")");

  cublasLtMatmulPreference_t pref = nullptr;
  check(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate (" + what + ")");
  const std::uint64_t ws = workspace_bytes_;
  cublasStatus_t st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
  if (st == CUBLAS_STATUS_SUCCESS)
    st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al_a, sizeof al_a);
  if (st == CUBLAS_STATUS_SUCCESS)
    st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al_b, sizeof al_b);
  if (st == CUBLAS_STATUS_SUCCESS)
    st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al_c, sizeof al_c);
  if (st == CUBLAS_STATUS_SUCCESS)
    st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al_d, sizeof al_d);
  int returned = 0;
  if (st == CUBLAS_STATUS_SUCCESS)
    st = cublasLtMatmulAlgoGetHeuristic(static_cast<cublasLtHandle_t>(handle_), p->desc, p->a, p->b, p->c, p->c, pref,
                                        1, &p->heuristic, &returned);
  cublasLtMatmulPreferenceDestroy(pref);
  if (st != CUBLAS_STATUS_SUCCESS && st != CUBLAS_STATUS_NOT_SUPPORTED)
    check(st, "cublasLtMatmulAlgoGetHeuristic (" + what + ")");
  p->available = st == CUBLAS_STATUS_SUCCESS && returned > 0;
  if (p->available) {
    const cublasLtMatmulAlgo_t& algo = p->heuristic.algo;
    p->record.algo_id = algo_attr<std::int32_t>(algo, CUBLASLT_ALGO_CONFIG_ID, "ID");
    p->record.tile_id = algo_attr<std::uint32_t>(algo, CUBLASLT_ALGO_CONFIG_TILE_ID, "TILE_ID");
    p->record.splitk = algo_attr<std::int32_t>(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, "SPLITK_NUM");
    p->record.reduction_scheme = algo_attr<std::uint32_t>(algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, "REDUCTION_SCHEME");
    p->record.stages_id = algo_attr<std::uint32_t>(algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, "STAGES_ID");
    p->record.swizzle = algo_attr<std::uint32_t>(algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, "CTA_SWIZZLING");
    p->record.custom_option = algo_attr<std::uint32_t>(algo, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, "CUSTOM_OPTION");
    p->record.workspace_needed = p->heuristic.workspaceSize;
  }
  order_.emplace(p->record.problem, order_.size());
  return *plans_.emplace(p->record.problem, std::move(p)).first->second;
}

bool CudaGemm::run(void* stream, const GemmCall& call) {
  if (call.x.cols != call.w.cols)
    throw Error(std::string("cuBLASLt ") + call.what + ": x has " + std::to_string(call.x.cols) + " columns, w " +
                    std::to_string(call.w.cols),
                Exit::run_failed);
  if (call.x.rows == 0 || call.w.rows == 0) return true;
  std::lock_guard<std::mutex> lock(mutex_);
  if (!workspace_) throw Error("cuBLASLt: no workspace bound (the CUDA backend binds it with the arena)", Exit::run_failed);
  Plan& p = plan_for(call);
  if (!p.available) return false;
  // The bias pointer is part of the descriptor; the cached plan is reused for every bias of the
  // same alignment, so the pointer is set for this call.
  if (call.bias)
    check(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &call.bias, sizeof call.bias),
          "BIAS_POINTER (" + p.record.problem + ")");
  const float alpha = 1.0f, beta = call.beta;
  const cublasStatus_t st =
      cublasLtMatmul(static_cast<cublasLtHandle_t>(handle_), p.desc, &alpha, call.w.data, p.a, call.x.data, p.b, &beta,
                     call.out, p.c, call.out, p.c, &p.heuristic.algo, workspace_, workspace_bytes_,
                     static_cast<cudaStream_t>(stream));
  if (st == CUBLAS_STATUS_NOT_SUPPORTED) return false;
  check(st, "cublasLtMatmul (" + p.record.problem + ")");
  const cudaError_t e = cudaPeekAtLastError();
  if (e != cudaSuccess)
    throw Error("cuBLASLt: cublasLtMatmul (" + p.record.problem + ") launch failed: " + cudaGetErrorString(e),
                Exit::run_failed);
  ++p.record.calls;
  return true;
}

CudaGemmSettings CudaGemm::settings() const {
  std::lock_guard<std::mutex> lock(mutex_);
  CudaGemmSettings s;
  s.library = version_string();
  s.compute_type = "CUBLAS_COMPUTE_32F";
  s.scale_type = "CUDA_R_32F";
  s.ab_type = "CUDA_R_16BF";
  s.bias_epilogue = "CUBLASLT_EPILOGUE_BIAS (BF16 bias added to the float32 result before the one BF16 write)";
  s.workspace_bytes = workspace_bytes_;
  s.reduction_scheme_mask = CUBLASLT_REDUCTION_SCHEME_MASK;
  s.heuristic_requested = 1;
  s.algorithms.resize(plans_.size());
  for (const auto& [key, plan] : plans_) s.algorithms[order_.at(key)] = plan->record;
  return s;
}

}  // namespace psi::rt::cuda

namespace psi::rt {

std::string CudaGemmSettings::describe() const {
  std::ostringstream o;
  o << library << ": compute " << compute_type << ", scale " << scale_type << ", A/B " << ab_type << ", bias "
    << bias_epilogue << "\n";
  o << "workspace " << workspace_bytes << " bytes, reduction scheme mask 0x" << std::hex << reduction_scheme_mask
    << std::dec << " (BF16 reduced-precision split-K allowed), heuristic asked for " << heuristic_requested
    << " algorithm\n";
  for (const CudaGemmAlgo& a : algorithms)
    o << a.problem << ": algo " << a.algo_id << " tile " << a.tile_id << " splitK " << a.splitk << " reduction "
      << a.reduction_scheme << " stages " << a.stages_id << " swizzle " << a.swizzle << " custom " << a.custom_option
      << " workspace " << a.workspace_needed << " calls " << a.calls
      << (a.algo_id < 0 ? " (no cuBLASLt algorithm: unfused path)" : "") << "\n";
  return o.str();
}

}  // namespace psi::rt
