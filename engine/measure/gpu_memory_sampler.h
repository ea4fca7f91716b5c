#pragma once
// GPU memory sampled on a background thread at a fixed period, keeping the peaks: the psi
// process's own use as the driver lists it, and the whole device's. The arena's accounting
// (RunReport::peak) counts only what psi manages; this is what the device saw, including the
// CUDA context, cuBLAS and anything else the process holds.
//
// The reading is injected (a GpuMemorySource) so the sampling runs and is tested without a GPU;
// nvml.h reads a real device. Once sampling has started nothing here throws: a failed reading is
// counted and the last failure is kept in the report.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace psi::rt {

// What one reading says about the process being sampled.
enum class ProcessPresence {
  listed,                // listed with its memory
  not_listed,            // not among the device's compute processes
  memory_not_available,  // listed, but the driver gives no memory figure for it
};

struct GpuMemoryReading {
  std::uint64_t device_used = 0, device_total = 0;
  ProcessPresence process = ProcessPresence::not_listed;
  std::uint64_t process_used = 0;      // when listed
  std::uint32_t pid = 0;               // the process looked for
  std::uint32_t processes_listed = 0;  // compute processes the device listed (any owner)
};

// Takes one reading; throws (a std::exception) when the device cannot be read.
using GpuMemorySource = std::function<GpuMemoryReading()>;

struct GpuMemoryReport {
  bool applicable = false;  // the run's backend has GPU memory to sample
  bool available = false;   // at least one reading succeeded
  std::string status;       // one line: what was sampled, or why nothing was
  double period_ms = 0;
  std::uint64_t samples = 0, failed_samples = 0;
  std::string last_error;  // the last failed reading's message
  std::uint64_t device_total = 0, device_used_peak = 0;
  std::uint32_t pid = 0;
  std::uint64_t process_samples = 0;            // readings that listed the process with its memory
  std::uint64_t process_no_figure_samples = 0;  // readings that listed it without a memory figure
  std::uint64_t process_peak = 0;               // meaningful only when process_samples > 0
  std::string process_status;         // "listed in k of n samples", or why it was not
};

// The report of a run whose backend has no GPU memory (the CPU backend).
GpuMemoryReport gpu_memory_not_applicable(const std::string& why);
// The report of a run where GPU memory could not be sampled (no NVML, no device, init error).
GpuMemoryReport gpu_memory_unavailable(const std::string& why);

class GpuMemorySampler {
 public:
  // Starts sampling: the first reading at once, then one every `period`. If the thread cannot be
  // started, the report says so (the constructor does not throw for it).
  GpuMemorySampler(GpuMemorySource source, std::chrono::microseconds period);
  ~GpuMemorySampler();  // stop()
  GpuMemorySampler(const GpuMemorySampler&) = delete;
  GpuMemorySampler& operator=(const GpuMemorySampler&) = delete;

  // The peaks so far (the thread keeps sampling).
  GpuMemoryReport snapshot() const;
  // Stops and joins the thread, takes one last reading (the state at the end of the run), and
  // returns the final report. Later calls return the same report.
  GpuMemoryReport stop();

 private:
  void loop();
  void sample();  // one reading folded into the peaks; called by one thread at a time
  GpuMemoryReport make_report() const;  // with mutex_ held

  GpuMemorySource source_;
  std::chrono::microseconds period_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false, stopped_ = false;
  std::string start_failure_;  // why the thread could not be started
  std::uint64_t samples_ = 0, failed_ = 0, process_samples_ = 0, memory_not_available_ = 0;
  std::uint64_t device_total_ = 0, device_used_peak_ = 0, process_peak_ = 0;
  std::uint32_t pid_ = 0, most_processes_listed_ = 0;
  std::string last_error_;
  std::thread thread_;
};

}  // namespace psi::rt
