#include "engine/backend/cuda/cuda_backend.h"

#include <cuda_runtime.h>

#include <sstream>
#include <vector>

#include "engine/error.h"

namespace psi::rt {
namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw Error(std::string("cuda: ") + what + " failed: " + cudaGetErrorString(e), Exit::run_failed);
}

class CudaBackend final : public Backend {
 public:
  CudaBackend(int device, const CudaKernelSettings& settings) {
    check(cudaSetDevice(device), "cudaSetDevice");
    cudaDeviceProp prop{};
    check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
    device_ = std::string(prop.name) + " (compute capability " + std::to_string(prop.major) + "." +
              std::to_string(prop.minor) + ")";
    kernels_ = make_cuda_op_kernels(settings);
    blas_workspace_bytes_ = settings.blas_workspace_bytes;
  }

  ~CudaBackend() override {
    // Destruction must not throw; errors here would only repeat an earlier reported one.
    for (cudaStream_t s : streams_) {
      cudaStreamSynchronize(s);
      cudaStreamDestroy(s);
    }
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
    if (arena_) cudaFree(arena_);
  }

  std::string_view name() const override { return "cuda"; }

  // One cudaMalloc: the arena, padded to 256 bytes, then the cuBLASLt workspace.
  std::byte* allocate_arena(std::size_t bytes) override {
    if (arena_) throw Error("cuda backend: the arena is already allocated (one allocation per run)", Exit::run_failed);
    const std::size_t workspace_at = (bytes + 255) / 256 * 256;  // cuBLASLt wants 256-byte alignment
    void* p = nullptr;
    check(cudaMalloc(&p, workspace_at + blas_workspace_bytes_), "cudaMalloc(arena + cuBLASLt workspace)");
    arena_ = static_cast<std::byte*>(p);
    arena_bytes_ = bytes;
    allocation_bytes_ = workspace_at + blas_workspace_bytes_;
    ++device_allocations_;
    kernels_->bind(bytes, arena_ + workspace_at, blas_workspace_bytes_);
    return arena_;
  }
  std::uint64_t device_allocations() const override { return device_allocations_; }

  HostBuffer allocate_pinned(std::size_t bytes) override {
    void* p = nullptr;
    check(cudaMallocHost(&p, bytes), "cudaMallocHost(staging)");
    ++pinned_allocations_;
    return HostBuffer{static_cast<std::byte*>(p), bytes, std::shared_ptr<void>(p, [](void* q) { cudaFreeHost(q); })};
  }
  std::uint64_t pinned_allocations() const override { return pinned_allocations_; }

  StreamHandle create_stream(std::string_view) override {
    cudaStream_t s = nullptr;
    check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    streams_.push_back(s);
    return StreamHandle(streams_.size() - 1);
  }

  EventHandle create_event() override {
    cudaEvent_t e = nullptr;
    check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags");
    events_.push_back(e);
    return EventHandle(events_.size() - 1);
  }

  void record(EventHandle e, StreamHandle s) override { check(cudaEventRecord(ev(e), st(s)), "cudaEventRecord"); }
  void wait(StreamHandle s, EventHandle e) override { check(cudaStreamWaitEvent(st(s), ev(e), 0), "cudaStreamWaitEvent"); }

  bool query(EventHandle e) override {
    cudaError_t r = cudaEventQuery(ev(e));
    if (r == cudaErrorNotReady) return false;
    check(r, "cudaEventQuery");
    return true;
  }
  void synchronize_event(EventHandle e) override { check(cudaEventSynchronize(ev(e)), "cudaEventSynchronize"); }
  void synchronize_stream(StreamHandle s) override { check(cudaStreamSynchronize(st(s)), "cudaStreamSynchronize"); }

  void copy_h2d(StreamHandle s, std::size_t dst_offset, const std::byte* src, std::size_t bytes, Hooks) override {
    check(cudaMemcpyAsync(arena_ + dst_offset, src, bytes, cudaMemcpyHostToDevice, st(s)), "cudaMemcpyAsync(H2D)");
  }
  void copy_d2h(StreamHandle s, std::byte* dst, std::size_t src_offset, std::size_t bytes, Hooks) override {
    check(cudaMemcpyAsync(dst, arena_ + src_offset, bytes, cudaMemcpyDeviceToHost, st(s)), "cudaMemcpyAsync(D2H)");
  }

  void launch(StreamHandle s, Kernel kernel, Hooks) override {
    kernel(KernelContext{arena_, st(s), kernels_.get()});
    check(cudaPeekAtLastError(), "kernel launch");
  }

  bool runs_hooks() const override { return false; }
  void* native_stream(StreamHandle s) override { return st(s); }

  void rethrow_async_error() override { check(cudaPeekAtLastError(), "asynchronous work"); }

  CudaBackendReport report() const {
    CudaBackendReport r;
    r.device = device_;
    r.arena_bytes = arena_bytes_;
    r.blas_workspace_bytes = blas_workspace_bytes_;
    r.device_allocation_bytes = allocation_bytes_;
    r.gemm = kernels_->gemm_settings();
    return r;
  }

 private:
  cudaStream_t st(StreamHandle s) const { return streams_.at(std::size_t(s)); }
  cudaEvent_t ev(EventHandle e) const { return events_.at(std::size_t(e)); }

  std::string device_;
  std::unique_ptr<CudaOpKernels> kernels_;
  std::size_t blas_workspace_bytes_ = 0;
  std::byte* arena_ = nullptr;
  std::size_t arena_bytes_ = 0, allocation_bytes_ = 0;
  std::uint64_t device_allocations_ = 0;
  std::uint64_t pinned_allocations_ = 0;
  std::vector<cudaStream_t> streams_;
  std::vector<cudaEvent_t> events_;
};

}  // namespace

int cuda_device_count(std::string* why) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    if (why) *why = cudaGetErrorString(e);
    cudaGetLastError();  // clear the error so later CUDA calls do not report it again
    return 0;
  }
  if (n == 0 && why) *why = "no CUDA device";
  return n;
}

std::unique_ptr<Backend> make_cuda_backend(int device, const CudaKernelSettings& settings) {
  return std::make_unique<CudaBackend>(device, settings);
}

CudaBackendReport cuda_backend_report(const Backend& backend) {
  const auto* b = dynamic_cast<const CudaBackend*>(&backend);
  if (!b) throw Error("cuda backend report: backend " + std::string(backend.name()) + " is not the CUDA backend", Exit::run_failed);
  return b->report();
}

std::string CudaBackendReport::describe() const {
  std::ostringstream o;
  o << "cuda backend on " << device << ": one device allocation of " << device_allocation_bytes << " bytes = arena "
    << arena_bytes << " bytes (managed by the executor) + cuBLASLt workspace " << blas_workspace_bytes
    << " bytes (outside the arena)\n"
    << gemm.describe();
  return o.str();
}

}  // namespace psi::rt
