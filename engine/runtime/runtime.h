#pragma once
// The PSI runtime: one backend, one arena, two weight pages, scratch and workspace stack
// allocators, named streams and events, counted copies, and (in validate mode) the
// happens-before checker on every access. Operators run as:
//
//   int p = pager.next(rt.compute());                        // page holding the next weight tile,
//                                                            // copy event waited on by compute
//   rt.launch(rt.compute(), "ffn.up tile 2",
//             {reads(rt.pages().region(p)), reads(x), writes(h)},
//             [=](const KernelContext& k) { ...host_view<Bf16>(k, h)... });
//   pager.done(p, rt.compute());                             // consumer event recorded, page free
//
// Every device access an operation makes must be declared in its Accesses: that is what page
// lifecycle checks, journal residency and validate mode see.
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/runtime/arena.h"
#include "engine/backend/backend.h"
#include "engine/measure/budget.h"
#include "engine/measure/counters.h"
#include "engine/measure/gpu_memory_sampler.h"
#include "engine/backend/region.h"
#include "engine/runtime/run_failure.h"

namespace psi::rt {

class WeightPages;
class Validator;
class GpuMemoryMonitor;
struct TrackedAccess;

// Test-only: omit one dependency so the tests can show that validate mode (or chaos) catches it.
enum class Fault {
  none,
  fill_skips_consumer_wait,    // a page fill does not wait for the page's last consumer
  consume_skips_copy_wait,     // a consumer does not wait for the page's copy event
  commit_skips_producer_wait,  // an async journal commit does not wait for the producer
  reload_skips_consumer_wait,  // an async journal reload does not wait for the destination's users
};

struct RuntimeConfig {
  std::string backend = "cpu";      // auto | cpu | cuda
  std::int64_t arena_bytes = 0;     // A
  std::int64_t page_bytes = 0;      // P (two pages)
  std::int64_t workspace_bytes = 0; // W
  std::int64_t live_bytes = 0;      // S_live: the live state the plan declares it needs
  std::int64_t eps_bytes = 0;       // eps: declared allowance on top (alignment rounding)
  bool validate = false;
  std::optional<std::uint64_t> chaos_seed;  // CPU backend only
  unsigned chaos_max_us = 40;
  Fault fault = Fault::none;
  // A fixed budget on a backend without a device pool to reserve (the CPU backend): the arena
  // and every pinned host buffer together held under this many bytes; an allocation that would
  // pass it fails the run (Outcome::cap_exceeded) before it is made.
  std::optional<std::uint64_t> memory_cap;
  // GPU memory sampling period (CUDA backend; gpu_memory_monitor.h).
  std::chrono::microseconds gpu_sample_period{2000};
};

struct Stream {
  int id = -1;
  friend bool operator==(Stream, Stream) = default;
};
struct Event {
  int id = -1;
};

// Told about every declared device access before the operation is enqueued; may enqueue waits
// on `stream` (that is how journal residency and the page lifecycle hook in).
class AccessListener {
 public:
  virtual ~AccessListener() = default;
  virtual void before_access(Stream stream, std::string_view op, const Access& access) = 0;
};

struct RunReport {
  Outcome outcome = Outcome::complete;
  std::string backend;
  ArenaLayout layout;
  std::uint64_t live_bytes = 0, eps_bytes = 0;
  std::uint64_t bound = 0;  // S_live + W + 2P + eps
  std::uint64_t peak = 0;   // measured: 2P + largest simultaneous scratch + workspace use
  std::uint64_t scratch_high_water = 0, workspace_high_water = 0;
  std::uint64_t device_allocations = 0, pinned_allocations = 0;
  std::uint64_t pinned_bytes = 0;  // host staging and journal ring (not managed GPU memory)
  Counters counters;
  // What the device saw, sampled through NVML on the CUDA backend (or why not): the process
  // peak includes what the arena accounting leaves out (CUDA context, cuBLAS).
  GpuMemoryReport gpu_memory;
  // The fixed-budget reservation the run was held under; set by the caller that made it.
  std::optional<ReservationReport> reservation;
};

class Runtime {
 public:
  explicit Runtime(const RuntimeConfig& config);
  ~Runtime();  // drains every stream
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  const RuntimeConfig& config() const { return config_; }
  const ArenaLayout& layout() const { return layout_; }
  Backend& backend() { return *backend_; }
  std::string_view backend_note() const { return backend_note_; }
  bool validating() const { return validator_ != nullptr; }
  Fault fault() const { return config_.fault; }

  // Streams: "compute" and "copy" exist from the start.
  Stream compute() const { return compute_; }
  Stream copy() const { return copy_; }
  Stream create_stream(std::string_view name);
  std::string_view stream_name(Stream s) const { return stream_names_.at(std::size_t(s.id)); }

  Event create_event();
  void record(Event e, Stream s);
  void wait(Stream s, Event e);  // later work on s starts after e's captured work
  bool query(Event e);
  // Blocking host synchronizations, each counted.
  void host_wait(Event e);
  void host_wait(Stream s);
  void synchronize();

  // Asynchronous copies between pinned host memory and the arena. The host bytes must stay
  // valid and unmodified until the copy has run (wait on an event recorded after it).
  void copy_h2d(Stream s, const DeviceRegion& dst, const std::byte* src, CopyKind kind, std::string_view op);
  void copy_d2h(Stream s, std::byte* dst, const DeviceRegion& src, CopyKind kind, std::string_view op);
  void launch(Stream s, std::string_view op, const Accesses& accesses, Kernel kernel);
  // Declares a host-thread access to host memory (pinned staging, journal buffers) so that
  // validate mode checks it against in-flight copies. A no-op outside validate mode.
  void host_access(std::string_view op, const std::byte* p, std::size_t bytes, AccessMode mode);

  // Pinned host memory for staging; `what` names it in an allocation failure.
  HostBuffer allocate_pinned(std::size_t bytes, std::string_view what);

  DeviceRegion scratch_alloc(std::uint64_t bytes, std::string_view op, int tile, std::string_view name);
  void scratch_free(const DeviceRegion& r) { scratch_.free(r); }
  StackAllocator::Mark scratch_mark() const { return scratch_.mark(); }
  void scratch_reset(StackAllocator::Mark m) { scratch_.reset(m); }
  DeviceRegion workspace_alloc(std::uint64_t bytes, std::string_view op, int tile, std::string_view name);
  void workspace_free(const DeviceRegion& r) { workspace_.free(r); }

  WeightPages& pages() { return *pages_; }

  void add_listener(AccessListener* l);
  void remove_listener(AccessListener* l);

  Counters& counters() { return counters_; }

  // Waits for every stream without counting or rethrowing: for destructors and failure paths, so
  // that no enqueued work outlives the host memory it uses.
  void drain() noexcept;

  // Drains every stream, then throws RunFailure: no enqueued work outlives the failure.
  [[noreturn]] void fail(Outcome outcome, const std::string& msg);

  // A snapshot of the run so far (outcome complete).
  RunReport report() const;
  // Drains every stream, rethrows any asynchronous error, checks that the run made exactly one
  // device allocation and that the measured peak is within the declared bound (RunFailure
  // bound_exceeded otherwise), and returns the report.
  RunReport finish();

 private:
  int lane(Stream s) const { return s.id + 1; }
  // Fails the run (cap_exceeded) when `bytes` more would take the arena and pinned buffers over
  // config_.memory_cap.
  void hold_under_cap(std::uint64_t bytes, std::string_view what);
  // Listeners, then the validator, for one operation; returns its execute-time hooks.
  Hooks admit(Stream s, std::string_view op, const Accesses& accesses, const std::vector<TrackedAccess>& host);

  RuntimeConfig config_;
  ArenaLayout layout_;
  std::unique_ptr<Backend> backend_;
  std::string backend_note_;
  std::unique_ptr<GpuMemoryMonitor> gpu_memory_;
  std::unique_ptr<Validator> validator_;
  std::byte* arena_ = nullptr;
  PeakMeter meter_;
  StackAllocator scratch_;
  StackAllocator workspace_;
  std::vector<std::string> stream_names_;
  std::vector<StreamHandle> stream_handles_;
  std::vector<EventHandle> event_handles_;
  std::vector<int> event_lanes_;  // the validator's event index
  Stream compute_, copy_;
  Counters counters_;
  std::uint64_t pinned_bytes_ = 0;
  std::vector<AccessListener*> listeners_;
  std::unique_ptr<WeightPages> pages_;
};

// A CPU-backend kernel's view of a region as elements of T (the arena is host memory there).
template <class T>
std::span<T> host_view(const KernelContext& k, const DeviceRegion& r) {
  return {reinterpret_cast<T*>(k.arena_base + r.offset), r.bytes / sizeof(T)};
}

}  // namespace psi::rt
