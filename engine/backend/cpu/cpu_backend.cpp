#include "engine/backend/cpu/cpu_backend.h"
#include "engine/backend/cpu/cpu_kernels.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "engine/error.h"
#include "engine/synthinit.h"

namespace psi::rt {
namespace {

struct StreamState;

// One queued operation: either work (a copy or a kernel, with its hooks) or a wait for another
// stream to have completed `point` operations.
struct Op {
  std::function<void()> work;
  Hooks hooks;
  StreamState* wait_for = nullptr;
  std::uint64_t point = 0;
};

struct StreamState {
  std::string name;
  std::mutex m;
  std::condition_variable cv_queue;  // the worker sleeps here until work arrives
  std::condition_variable cv_done;   // waiters sleep here until `completed` advances
  std::deque<Op> queue;
  std::uint64_t enqueued = 0;        // operations ever enqueued (an event's point)
  std::uint64_t completed = 0;       // operations finished, in order
  bool stop = false;
  std::thread worker;
};

struct EventState {
  StreamState* stream = nullptr;  // nullptr: never recorded, counts as complete
  std::uint64_t point = 0;
};

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(const CpuBackendOptions& o) : options_(o) {}

  ~CpuBackend() override {
    for (auto& s : streams_) {
      {
        std::lock_guard lk(s->m);
        s->stop = true;
      }
      s->cv_queue.notify_all();
    }
    for (auto& s : streams_) s->worker.join();
  }

  std::string_view name() const override { return "cpu"; }

  std::byte* allocate_arena(std::size_t bytes) override {
    if (arena_) throw Error("cpu backend: the arena is already allocated (one allocation per run)", Exit::run_failed);
    void* p = std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
    if (!p) throw Error("cpu backend: cannot allocate an arena of " + std::to_string(bytes) + " bytes", Exit::run_failed);
    arena_.reset(static_cast<std::byte*>(p));
    ++device_allocations_;
    return arena_.get();
  }
  std::uint64_t device_allocations() const override { return device_allocations_; }

  HostBuffer allocate_pinned(std::size_t bytes) override {
    void* p = std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
    if (!p) throw Error("cpu backend: cannot allocate " + std::to_string(bytes) + " bytes of host staging", Exit::run_failed);
    ++pinned_allocations_;
    return HostBuffer{static_cast<std::byte*>(p), bytes, std::shared_ptr<void>(p, std::free)};
  }
  std::uint64_t pinned_allocations() const override { return pinned_allocations_; }

  StreamHandle create_stream(std::string_view name) override {
    std::lock_guard lk(tables_);
    auto s = std::make_unique<StreamState>();
    s->name = std::string(name);
    StreamState* raw = s.get();
    const std::uint64_t chaos_seed = options_.chaos_seed.value_or(0) ^ synthinit::fnv1a64(name);
    raw->worker = std::thread([this, raw, chaos_seed] { run_worker(*raw, chaos_seed); });
    streams_.push_back(std::move(s));
    return StreamHandle(streams_.size() - 1);
  }

  EventHandle create_event() override {
    std::lock_guard lk(tables_);
    events_.emplace_back();
    return EventHandle(events_.size() - 1);
  }

  void record(EventHandle e, StreamHandle s) override {
    StreamState& st = stream(s);
    std::uint64_t point;
    {
      std::lock_guard lk(st.m);
      point = st.enqueued;
    }
    std::lock_guard lk(tables_);
    events_.at(std::size_t(e)) = EventState{&st, point};
  }

  void wait(StreamHandle s, EventHandle e) override {
    EventState ev = event(e);
    if (!ev.stream) return;
    Op op;
    op.wait_for = ev.stream;
    op.point = ev.point;
    enqueue(stream(s), std::move(op));
  }

  bool query(EventHandle e) override {
    EventState ev = event(e);
    if (!ev.stream) return true;
    std::lock_guard lk(ev.stream->m);
    return ev.stream->completed >= ev.point;
  }

  void synchronize_event(EventHandle e) override {
    EventState ev = event(e);
    if (ev.stream) wait_completed(*ev.stream, ev.point);
  }

  void synchronize_stream(StreamHandle s) override {
    StreamState& st = stream(s);
    std::uint64_t point;
    {
      std::lock_guard lk(st.m);
      point = st.enqueued;
    }
    wait_completed(st, point);
  }

  void copy_h2d(StreamHandle s, std::size_t dst_offset, const std::byte* src, std::size_t bytes,
                Hooks hooks) override {
    std::byte* dst = arena_.get() + dst_offset;
    Op op;
    op.work = [dst, src, bytes] { std::memcpy(dst, src, bytes); };
    op.hooks = std::move(hooks);
    enqueue(stream(s), std::move(op));
  }

  void copy_d2h(StreamHandle s, std::byte* dst, std::size_t src_offset, std::size_t bytes,
                Hooks hooks) override {
    const std::byte* src = arena_.get() + src_offset;
    Op op;
    op.work = [dst, src, bytes] { std::memcpy(dst, src, bytes); };
    op.hooks = std::move(hooks);
    enqueue(stream(s), std::move(op));
  }

  void launch(StreamHandle s, Kernel kernel, Hooks hooks) override {
    KernelContext ctx{arena_.get(), nullptr, &cpu_op_kernels()};
    Op op;
    op.work = [kernel = std::move(kernel), ctx] { kernel(ctx); };
    op.hooks = std::move(hooks);
    enqueue(stream(s), std::move(op));
  }

  bool runs_hooks() const override { return true; }
  void* native_stream(StreamHandle) override { return nullptr; }

  void rethrow_async_error() override {
    if (!failed_.load()) return;
    std::lock_guard lk(error_m_);
    std::rethrow_exception(error_);
  }

 private:
  StreamState& stream(StreamHandle s) {
    std::lock_guard lk(tables_);
    return *streams_.at(std::size_t(s));
  }
  EventState event(EventHandle e) {
    std::lock_guard lk(tables_);
    return events_.at(std::size_t(e));
  }

  static void enqueue(StreamState& st, Op op) {
    {
      std::lock_guard lk(st.m);
      st.queue.push_back(std::move(op));
      ++st.enqueued;
    }
    st.cv_queue.notify_one();
  }

  static void wait_completed(StreamState& st, std::uint64_t point) {
    std::unique_lock lk(st.m);
    st.cv_done.wait(lk, [&] { return st.completed >= point; });
  }

  void run_worker(StreamState& st, std::uint64_t chaos_seed) {
    std::mt19937_64 rng(chaos_seed);
    for (;;) {
      Op op;
      {
        std::unique_lock lk(st.m);
        st.cv_queue.wait(lk, [&] { return st.stop || !st.queue.empty(); });
        if (st.queue.empty()) return;  // stop requested and drained
        op = std::move(st.queue.front());
        st.queue.pop_front();
      }
      if (options_.chaos_seed && (rng() & 1u))
        std::this_thread::sleep_for(std::chrono::microseconds(rng() % (options_.chaos_max_us + 1)));
      if (op.wait_for) {
        wait_completed(*op.wait_for, op.point);
      } else if (!failed_.load()) {
        // After a failure the remaining work is skipped (its inputs may be wrong) but still
        // completes, so that waits on it never hang.
        try {
          if (op.hooks.before) op.hooks.before();
          op.work();
          if (op.hooks.after) op.hooks.after();
        } catch (...) {
          std::lock_guard lk(error_m_);
          if (!failed_.load()) {
            error_ = std::current_exception();
            failed_.store(true);
          }
        }
      }
      {
        std::lock_guard lk(st.m);
        ++st.completed;
      }
      st.cv_done.notify_all();
    }
  }

  struct FreeDeleter {
    void operator()(std::byte* p) const { std::free(p); }
  };

  CpuBackendOptions options_;
  std::unique_ptr<std::byte, FreeDeleter> arena_;
  std::uint64_t device_allocations_ = 0;
  std::uint64_t pinned_allocations_ = 0;
  std::mutex tables_;
  std::vector<std::unique_ptr<StreamState>> streams_;
  std::vector<EventState> events_;
  std::atomic<bool> failed_{false};
  std::mutex error_m_;
  std::exception_ptr error_;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(const CpuBackendOptions& options) {
  return std::make_unique<CpuBackend>(options);
}

}  // namespace psi::rt
