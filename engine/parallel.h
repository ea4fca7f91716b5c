#pragma once
// Thread fan-out for the CPU operators. Work is split into independent tasks, each of which
// computes a fixed set of outputs in a fixed order, so results never depend on the thread
// count or on which thread ran which task.
#include <cstdint>
#include <functional>

namespace psi {

// Threads used by parallel_for: PSI_THREADS if set (1..1024, engine/environment.h), else the hardware concurrency.
int thread_count();
// Overrides thread_count() for this process (0 restores the default); for tests and benches.
void set_thread_count(int n);

// Runs task(i) for every i in [0, n). Tasks must not write shared outputs. Called from inside
// a task, it runs its own tasks inline on that thread. Before each task it is a check point for
// signals (check_interrupt_in_operator): once one has arrived no further task starts and the
// call throws the interruption after the running ones end. It also lets a long operator pulse
// (progress_pulse, engine/progress.h), so that a log shows it is alive.
void parallel_for(std::int64_t n, const std::function<void(std::int64_t)>& task);

}  // namespace psi
