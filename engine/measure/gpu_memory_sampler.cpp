#include "engine/measure/gpu_memory_sampler.h"

#include <algorithm>
#include <exception>
#include <system_error>

namespace psi::rt {

GpuMemoryReport gpu_memory_not_applicable(const std::string& why) {
  GpuMemoryReport r;
  r.status = "not applicable: " + why;
  r.process_status = r.status;
  return r;
}

GpuMemoryReport gpu_memory_unavailable(const std::string& why) {
  GpuMemoryReport r;
  r.applicable = true;
  r.status = "unavailable: " + why;
  r.process_status = r.status;
  return r;
}

GpuMemorySampler::GpuMemorySampler(GpuMemorySource source, std::chrono::microseconds period)
    : source_(std::move(source)), period_(std::max(period, std::chrono::microseconds(1))) {
  try {
    thread_ = std::thread(&GpuMemorySampler::loop, this);
  } catch (const std::system_error& e) {
    start_failure_ = e.what();
  }
}

GpuMemorySampler::~GpuMemorySampler() { stop(); }

void GpuMemorySampler::loop() {
  using Clock = std::chrono::steady_clock;
  auto next = Clock::now();
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    lock.unlock();
    sample();
    lock.lock();
    // A fixed period measured from the previous deadline, so slow readings do not stretch it;
    // when a reading took longer than the period, the next one starts at once.
    next = std::max(next + period_, Clock::now());
    wake_.wait_until(lock, next, [this] { return stopping_; });
  }
}

void GpuMemorySampler::sample() {
  GpuMemoryReading r;
  std::string error;
  try {
    r = source_();
  } catch (const std::exception& e) {
    error = e.what();
    if (error.empty()) error = "reading failed";
  } catch (...) {
    error = "reading failed (not a std::exception)";
  }
  std::lock_guard lock(mutex_);
  if (!error.empty()) {
    ++failed_;
    last_error_ = std::move(error);
    return;
  }
  ++samples_;
  device_total_ = r.device_total;
  device_used_peak_ = std::max(device_used_peak_, r.device_used);
  pid_ = r.pid;
  most_processes_listed_ = std::max(most_processes_listed_, r.processes_listed);
  if (r.process == ProcessPresence::listed) {
    ++process_samples_;
    process_peak_ = std::max(process_peak_, r.process_used);
  } else if (r.process == ProcessPresence::memory_not_available) {
    ++memory_not_available_;
  }
}

GpuMemoryReport GpuMemorySampler::snapshot() const {
  std::lock_guard lock(mutex_);
  return make_report();
}

GpuMemoryReport GpuMemorySampler::stop() {
  {
    std::lock_guard lock(mutex_);
    if (stopped_) return make_report();
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (start_failure_.empty()) sample();  // the state at the end of the run
  std::lock_guard lock(mutex_);
  stopped_ = true;
  return make_report();
}

GpuMemoryReport GpuMemorySampler::make_report() const {
  if (!start_failure_.empty())
    return gpu_memory_unavailable("the sampling thread could not be started (" + start_failure_ + ")");
  GpuMemoryReport r;
  r.applicable = true;
  r.available = samples_ > 0;
  r.period_ms = double(period_.count()) / 1000.0;
  r.samples = samples_;
  r.failed_samples = failed_;
  r.last_error = last_error_;
  r.device_total = device_total_;
  r.device_used_peak = device_used_peak_;
  r.pid = pid_;
  r.process_samples = process_samples_;
  r.process_no_figure_samples = memory_not_available_;
  r.process_peak = process_peak_;
  const std::string n = std::to_string(samples_);
  if (!r.available) {
    r.status = failed_ == 0 ? "unavailable: no reading taken yet"
                            : "unavailable: all " + std::to_string(failed_) + " readings failed (last: " + last_error_ + ")";
    r.process_status = r.status;
    return r;
  }
  r.status = "sampled: " + n + " readings" +
             (failed_ ? ", " + std::to_string(failed_) + " failed (last: " + last_error_ + ")" : std::string());
  if (process_samples_ > 0) {
    r.process_status = "listed in " + std::to_string(process_samples_) + " of " + n + " readings";
  } else if (memory_not_available_ > 0) {
    r.process_status = "process listed in " + std::to_string(memory_not_available_) + " of " + n +
                       " readings, but the driver gives no memory figure for it";
  } else {
    // Seen on virtualized and containerized machines: the driver lists processes by the host's
    // pid, so this process can appear under another pid or not at all.
    r.process_status = "process not listed: pid " + std::to_string(pid_) + " was in none of " + n +
                       " readings (at most " + std::to_string(most_processes_listed_) +
                       " compute processes listed; the driver lists host pids, which differ inside a container or VM)";
  }
  return r;
}

}  // namespace psi::rt
