// GPU memory sampling without a GPU: the sampler driven by an injected reading (peaks, counts,
// start and stop, failed readings, a process NVML does not list), NVML's reading of a process
// list, the unavailable paths of the NVML loader, and what a CPU run reports.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include "engine/measure/gpu_memory_monitor.h"
#include "engine/measure/gpu_memory_sampler.h"
#include "engine/measure/nvml.h"
#include "engine/runtime/run_report.h"
#include "engine/runtime/runtime.h"

namespace rt = psi::rt;
using namespace std::chrono_literals;

namespace {

rt::GpuMemoryReading listed(std::uint64_t device_used, std::uint64_t process_used) {
  rt::GpuMemoryReading r;
  r.device_used = device_used;
  r.device_total = 1000;
  r.process = rt::ProcessPresence::listed;
  r.process_used = process_used;
  r.pid = 42;
  r.processes_listed = 2;
  return r;
}

rt::GpuMemoryReading not_listed(std::uint64_t device_used, std::uint32_t others) {
  rt::GpuMemoryReading r;
  r.device_used = device_used;
  r.device_total = 1000;
  r.pid = 42;
  r.processes_listed = others;
  return r;
}

// Plays `script` reading by reading, then repeats its last reading; counts every call.
struct Scripted {
  std::vector<rt::GpuMemoryReading> script;
  std::shared_ptr<std::atomic<std::size_t>> calls = std::make_shared<std::atomic<std::size_t>>(0);
  rt::GpuMemorySource source() {
    return [script = script, calls = calls] {
      const std::size_t i = calls->fetch_add(1);
      return script[std::min(i, script.size() - 1)];
    };
  }
};

// Waits (bounded) until the sampler thread has taken `n` readings.
void wait_for_calls(const std::atomic<std::size_t>& calls, std::size_t n) {
  for (int i = 0; i < 5000 && calls.load() < n; ++i) std::this_thread::sleep_for(1ms);
  ASSERT_GE(calls.load(), n) << "the sampler thread did not take its readings";
}

}  // namespace

TEST(GpuMemorySampler, KeepsThePeaksOfEveryReading) {
  Scripted s;
  s.script = {listed(100, 10), listed(700, 300), not_listed(900, 3), listed(400, 200), not_listed(50, 1)};
  rt::GpuMemorySampler sampler(s.source(), 100us);
  wait_for_calls(*s.calls, s.script.size());
  const rt::GpuMemoryReport r = sampler.stop();
  EXPECT_TRUE(r.applicable);
  EXPECT_TRUE(r.available);
  EXPECT_EQ(r.samples, s.calls->load());  // the readings after the script repeat its last one
  EXPECT_EQ(r.failed_samples, 0u);
  EXPECT_EQ(r.device_used_peak, 900u);  // a reading that did not list the process still counts for the device
  EXPECT_EQ(r.device_total, 1000u);
  EXPECT_EQ(r.process_peak, 300u);
  EXPECT_EQ(r.process_samples, 3u);
  EXPECT_EQ(r.pid, 42u);
  EXPECT_EQ(r.period_ms, 0.1);
  EXPECT_EQ(r.process_status, "listed in 3 of " + std::to_string(r.samples) + " readings");
  EXPECT_EQ(r.status, "sampled: " + std::to_string(r.samples) + " readings");
}

TEST(GpuMemorySampler, StopJoinsAtOnceTakesAFinalReadingAndIsIdempotent) {
  Scripted s;
  s.script = {listed(100, 10), listed(200, 20)};
  // An hour between readings: stop() must wake the thread rather than wait out the period.
  rt::GpuMemorySampler sampler(s.source(), std::chrono::hours(1));
  const rt::GpuMemoryReport first = sampler.stop();
  const std::size_t calls = s.calls->load();
  EXPECT_GE(calls, 1u);  // the final reading, whether or not the thread got to its first
  EXPECT_LE(calls, 2u);
  EXPECT_EQ(first.samples, calls);
  EXPECT_EQ(first.device_used_peak, calls == 2 ? 200u : 100u);
  const rt::GpuMemoryReport again = sampler.stop();
  const rt::GpuMemoryReport snap = sampler.snapshot();
  EXPECT_EQ(s.calls->load(), calls);  // no reading after stop
  EXPECT_EQ(again.samples, first.samples);
  EXPECT_EQ(snap.samples, first.samples);
  EXPECT_EQ(snap.device_used_peak, first.device_used_peak);
}

TEST(GpuMemorySampler, SnapshotWhileSamplingAndStopByDestruction) {
  Scripted s;
  s.script = {listed(100, 10), listed(500, 50), listed(300, 30)};
  std::size_t seen = 0;
  {
    rt::GpuMemorySampler sampler(s.source(), 50us);
    wait_for_calls(*s.calls, 3);
    const rt::GpuMemoryReport r = sampler.snapshot();
    seen = r.samples;
    EXPECT_GE(r.samples, 2u);  // at least the readings before the last call had been folded in
    EXPECT_EQ(r.device_used_peak, 500u);
  }  // the destructor stops and joins the thread
  const std::size_t after = s.calls->load();
  std::this_thread::sleep_for(5ms);
  EXPECT_EQ(s.calls->load(), after);
  EXPECT_GE(after, seen);
}

TEST(GpuMemorySampler, FailedReadingsAreCountedAndNamed) {
  auto calls = std::make_shared<std::atomic<std::size_t>>(0);
  rt::GpuMemorySampler sampler(
      [calls]() -> rt::GpuMemoryReading {
        if (calls->fetch_add(1) % 2 == 0) throw std::runtime_error("nvmlDeviceGetMemoryInfo failed: GPU is lost");
        return listed(100, 10);
      },
      100us);
  wait_for_calls(*calls, 4);
  const rt::GpuMemoryReport r = sampler.stop();
  EXPECT_TRUE(r.available);
  EXPECT_EQ(r.samples + r.failed_samples, std::uint64_t(calls->load()));
  EXPECT_GE(r.failed_samples, 2u);
  EXPECT_EQ(r.last_error, "nvmlDeviceGetMemoryInfo failed: GPU is lost");
  EXPECT_EQ(r.status, "sampled: " + std::to_string(r.samples) + " readings, " + std::to_string(r.failed_samples) +
                          " failed (last: nvmlDeviceGetMemoryInfo failed: GPU is lost)");
}

TEST(GpuMemorySampler, EveryReadingFailedMeansUnavailable) {
  rt::GpuMemorySampler sampler([]() -> rt::GpuMemoryReading { throw std::runtime_error("no device"); }, 100us);
  const rt::GpuMemoryReport r = sampler.stop();
  EXPECT_TRUE(r.applicable);
  EXPECT_FALSE(r.available);
  EXPECT_EQ(r.samples, 0u);
  EXPECT_GE(r.failed_samples, 1u);
  EXPECT_EQ(r.status, "unavailable: all " + std::to_string(r.failed_samples) + " readings failed (last: no device)");
  EXPECT_EQ(r.process_status, r.status);
  const auto j = rt::to_json(r);
  EXPECT_TRUE(j["device_used_peak_bytes"].is_null());
  EXPECT_TRUE(j["device_total_bytes"].is_null());
  EXPECT_TRUE(j["process_peak_bytes"].is_null());
}

// Some virtualized or containerized machines list the process under another pid or not at all:
// the report says so and gives no process figure, rather than a peak of 0.
TEST(GpuMemorySampler, AProcessNeverListedIsReportedAsNotListed) {
  Scripted s;
  s.script = {not_listed(600, 0), not_listed(650, 1)};
  rt::GpuMemorySampler sampler(s.source(), 100us);
  wait_for_calls(*s.calls, 2);
  const rt::GpuMemoryReport r = sampler.stop();
  EXPECT_TRUE(r.available);
  EXPECT_EQ(r.process_samples, 0u);
  EXPECT_EQ(r.device_used_peak, 650u);
  EXPECT_EQ(r.process_status, "process not listed: pid 42 was in none of " + std::to_string(r.samples) +
                                  " readings (at most 1 compute processes listed; the driver lists host pids, "
                                  "which differ inside a container or VM)");
  const auto j = rt::to_json(r);
  EXPECT_TRUE(j["process_peak_bytes"].is_null());
  EXPECT_EQ(j["device_used_peak_bytes"], 650);
  EXPECT_EQ(j["process_samples"], 0);
}

TEST(GpuMemorySampler, AProcessListedWithoutAFigureSaysSo) {
  rt::GpuMemoryReading r = listed(100, 0);
  r.process = rt::ProcessPresence::memory_not_available;
  Scripted s;
  s.script = {r};
  rt::GpuMemorySampler sampler(s.source(), 100us);
  const rt::GpuMemoryReport rep = sampler.stop();
  EXPECT_EQ(rep.process_samples, 0u);
  EXPECT_EQ(rep.process_no_figure_samples, rep.samples);
  EXPECT_EQ(rep.process_status, "process listed in " + std::to_string(rep.samples) + " of " +
                                    std::to_string(rep.samples) + " readings, but the driver gives no memory figure for it");
}

TEST(NvmlReading, FindsTheProcessSumsItsEntriesAndKnowsMissingFigures) {
  const std::vector<rt::NvmlProcessEntry> procs{{7, 1000}, {42, 300}, {9, 5}, {42, 200}};
  const rt::GpuMemoryReading r = rt::nvml_reading(42, 5000, 8000, procs);
  EXPECT_EQ(r.process, rt::ProcessPresence::listed);
  EXPECT_EQ(r.process_used, 500u);  // one entry per MIG instance is summed
  EXPECT_EQ(r.device_used, 5000u);
  EXPECT_EQ(r.device_total, 8000u);
  EXPECT_EQ(r.processes_listed, 4u);
  EXPECT_EQ(r.pid, 42u);

  const rt::GpuMemoryReading absent = rt::nvml_reading(43, 5000, 8000, procs);
  EXPECT_EQ(absent.process, rt::ProcessPresence::not_listed);
  EXPECT_EQ(absent.process_used, 0u);

  const std::vector<rt::NvmlProcessEntry> wddm{{42, rt::kNvmlValueNotAvailable}};
  const rt::GpuMemoryReading na = rt::nvml_reading(42, 1, 2, wddm);
  EXPECT_EQ(na.process, rt::ProcessPresence::memory_not_available);
  EXPECT_EQ(na.process_used, 0u);

  EXPECT_EQ(rt::nvml_reading(42, 1, 2, {}).process, rt::ProcessPresence::not_listed);
}

TEST(Nvml, AMissingLibraryIsReportedNotThrown) {
  const rt::NvmlOpen o = rt::open_nvml("libpsi-test-no-such-nvml.so.1", {});
  EXPECT_FALSE(o.source);
  EXPECT_TRUE(o.why.starts_with("NVML not loaded: dlopen(libpsi-test-no-such-nvml.so.1) failed: ")) << o.why;
  EXPECT_EQ(o.why.find('\n'), std::string::npos);
}

TEST(Nvml, ALibraryWithoutNvmlIsReportedNotThrown) {
  // libm is on every glibc system and has none of NVML's symbols.
  const rt::NvmlOpen o = rt::open_nvml("libm.so.6", {});
  EXPECT_FALSE(o.source);
  EXPECT_EQ(o.why,
            "NVML in libm.so.6 lacks nvmlInit_v2, nvmlShutdown, nvmlErrorString, nvmlDeviceGetHandleByIndex_v2, "
            "nvmlDeviceGetHandleByPciBusId_v2, nvmlDeviceGetMemoryInfo, nvmlDeviceGetComputeRunningProcesses_v3");
}

TEST(GpuMemoryMonitor, NotApplicableOnTheCpuBackend) {
  rt::GpuMemoryMonitor m("cpu", {});
  const rt::GpuMemoryReport r = m.stop();
  EXPECT_FALSE(r.applicable);
  EXPECT_FALSE(r.available);
  EXPECT_EQ(r.status, "not applicable: the cpu backend has no GPU memory");
  EXPECT_EQ(r.process_status, r.status);  // the reason, wherever a reader looks
}

TEST(GpuMemoryMonitor, UnavailableWhenNvmlCannotBeLoaded) {
  rt::GpuMemoryMonitorOptions o;
  o.library = "libpsi-test-no-such-nvml.so.1";
  rt::GpuMemoryMonitor m("cuda", o);
  const rt::GpuMemoryReport r = m.report();
  EXPECT_TRUE(r.applicable);
  EXPECT_FALSE(r.available);
  // Without a CUDA device the PCI bus id lookup fails first in a CUDA build; either way the
  // reason is one line and nothing throws.
  EXPECT_TRUE(r.status.starts_with("unavailable: ")) << r.status;
  EXPECT_EQ(r.status.find('\n'), std::string::npos);
  EXPECT_EQ(rt::gpu_memory_summary(r), "; GPU memory (NVML) " + r.status);
}

TEST(GpuMemoryMonitor, ACpuRunReportsNotApplicableAndItsSummaryIsUnchanged) {
  rt::RuntimeConfig c;
  c.arena_bytes = 64 << 10;
  c.page_bytes = 8 << 10;
  c.workspace_bytes = 4 << 10;
  c.live_bytes = 16 << 10;
  rt::Runtime r(c);
  const rt::RunReport rep = r.finish();
  EXPECT_FALSE(rep.gpu_memory.applicable);
  EXPECT_FALSE(rep.reservation.has_value());
  const auto j = rt::to_json(rep);
  EXPECT_EQ(j["gpu_memory"]["applicable"], false);
  EXPECT_EQ(j["gpu_memory"]["status"], "not applicable: the cpu backend has no GPU memory");
  EXPECT_TRUE(j["gpu_memory"]["process_peak_bytes"].is_null());
  EXPECT_FALSE(j.contains("reservation"));
  EXPECT_EQ(rt::summary(rep).find("GPU"), std::string::npos);
}
