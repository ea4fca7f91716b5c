#pragma once
// The device abstraction under every PSI operator: one arena allocation, streams, events,
// asynchronous host<->device copies and kernels enqueued on a stream. Two implementations:
// the CPU backend (worker threads standing in for streams) and the CUDA backend.
//
// This header is self-contained (no out-of-line definitions) so that the CUDA backend library
// can implement it without linking back to psi_engine.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace psi::rt {

class OpKernels;  // op_kernels.h

// Handles are indices into the backend's own tables; they are only meaningful to the backend
// that made them.
using StreamHandle = int;
using EventHandle = int;

// What a kernel gets when it runs. On the CPU backend the kernel function IS the work and runs
// on the stream's worker thread, and arena_base is host-addressable. On the CUDA backend the
// function runs on the calling host thread at enqueue time and must only enqueue device work
// on native_stream (a cudaStream_t); arena_base is then a device pointer. `ops` is the
// backend's implementation of the block's arithmetic (op_kernels.h), valid while it runs.
struct KernelContext {
  std::byte* arena_base = nullptr;
  void* native_stream = nullptr;
  const OpKernels* ops = nullptr;
};
using Kernel = std::function<void(const KernelContext&)>;

// Run on the executing thread immediately before / after an operation. Only backends whose
// runs_hooks() is true run them (the CPU backend); validate mode uses them for its
// execute-time checks.
struct Hooks {
  std::function<void()> before;
  std::function<void()> after;
};

// Page-locked host memory on CUDA, ordinary aligned memory on the CPU backend.
struct HostBuffer {
  std::byte* data = nullptr;
  std::size_t bytes = 0;
  std::shared_ptr<void> owner;  // frees the memory with the backend's deallocator
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual std::string_view name() const = 0;  // "cpu" or "cuda"

  // The run's one device allocation. A second call is a programming error and throws.
  virtual std::byte* allocate_arena(std::size_t bytes) = 0;
  virtual std::uint64_t device_allocations() const = 0;
  virtual HostBuffer allocate_pinned(std::size_t bytes) = 0;
  virtual std::uint64_t pinned_allocations() const = 0;

  virtual StreamHandle create_stream(std::string_view name) = 0;
  virtual EventHandle create_event() = 0;

  // CUDA semantics: record captures the work enqueued on the stream so far; wait makes all
  // later work on `stream` start after that captured work; an event never recorded counts as
  // complete; re-recording replaces the captured point.
  virtual void record(EventHandle event, StreamHandle stream) = 0;
  virtual void wait(StreamHandle stream, EventHandle event) = 0;
  virtual bool query(EventHandle event) = 0;
  virtual void synchronize_event(EventHandle event) = 0;
  virtual void synchronize_stream(StreamHandle stream) = 0;

  // Asynchronous copies: the host side must stay valid and unmodified until the copy has run.
  virtual void copy_h2d(StreamHandle stream, std::size_t dst_offset, const std::byte* src,
                        std::size_t bytes, Hooks hooks) = 0;
  virtual void copy_d2h(StreamHandle stream, std::byte* dst, std::size_t src_offset,
                        std::size_t bytes, Hooks hooks) = 0;
  virtual void launch(StreamHandle stream, Kernel kernel, Hooks hooks) = 0;

  virtual bool runs_hooks() const = 0;

  // The backend's own stream object (a cudaStream_t on CUDA; nullptr on the CPU backend).
  virtual void* native_stream(StreamHandle stream) = 0;

  // Rethrows the first error raised by work that ran asynchronously (sticky, like CUDA's).
  virtual void rethrow_async_error() = 0;
};

}  // namespace psi::rt
