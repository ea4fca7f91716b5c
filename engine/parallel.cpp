#include "engine/parallel.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/environment.h"
#include "engine/interrupt.h"
#include "engine/progress.h"

namespace psi {

namespace {
std::atomic<int> g_override{0};
// Set while this thread runs a parallel_for task: a parallel_for inside a task runs inline, so
// an operator built from threaded ones (the FLASH core's per-tile products) neither multiplies
// the threads nor pays their start-up per call.
thread_local bool t_in_task = false;

int default_threads() {
  if (const auto n = env_threads()) return *n;
  return int(std::max(1u, std::thread::hardware_concurrency()));
}
}  // namespace

int thread_count() {
  int o = g_override.load();
  if (o >= 1) return o;
  static const int n = default_threads();
  return n;
}

void set_thread_count(int n) { g_override.store(std::max(0, n)); }

void parallel_for(std::int64_t n, const std::function<void(std::int64_t)>& task) {
  if (n <= 0) return;
  const int threads = t_in_task ? 1 : int(std::min<std::int64_t>(thread_count(), n));
  if (threads <= 1) {
    for (std::int64_t i = 0; i < n; ++i) {
      check_interrupt_in_operator();
      progress_pulse();
      task(i);
    }
    return;
  }
  // Dynamic hand-out keeps uneven tasks balanced; outputs do not depend on who runs what.
  std::atomic<std::int64_t> next{0};
  std::exception_ptr error;
  std::mutex error_mutex;
  auto worker = [&] {
    t_in_task = true;
    for (;;) {
      std::int64_t i = next.fetch_add(1);
      if (i >= n) {
        t_in_task = false;
        return;
      }
      try {
        check_interrupt_in_operator();
        progress_pulse();
        task(i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!error) error = std::current_exception();
        next.store(n);
      }
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(threads - 1);
  for (int t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (auto& th : pool) th.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace psi
