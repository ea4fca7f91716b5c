// CPU backend costs: H2D copy bandwidth (8 MiB), the event record + cross-stream wait round trip,
// and the per-launch overhead of a stream (raw backend, and through the runtime with and
// without validate mode).
#include <benchmark/benchmark.h>

#include <cstring>
#include <vector>

#include "engine/backend/cpu/cpu_backend.h"
#include "engine/runtime/runtime.h"

namespace rt = psi::rt;

namespace {

void BM_CpuH2D8MiB(benchmark::State& state) {
  constexpr std::size_t n = 8u << 20;
  auto b = rt::make_cpu_backend();
  b->allocate_arena(n);
  rt::HostBuffer host = b->allocate_pinned(n);
  std::memset(host.data, 1, n);
  const rt::StreamHandle s = b->create_stream("copy");
  b->copy_h2d(s, 0, host.data, n, {});  // touch the arena once so page faults are not timed
  b->synchronize_stream(s);
  for (auto _ : state) {
    b->copy_h2d(s, 0, host.data, n, {});
    b->synchronize_stream(s);
  }
  state.SetBytesProcessed(std::int64_t(state.iterations()) * std::int64_t(n));
}
BENCHMARK(BM_CpuH2D8MiB)->Unit(benchmark::kMicrosecond)->UseRealTime();

// Stream a records an event after a kernel, stream b waits on it and records its own, the host
// waits for b's: one A -> B -> host hand-off per iteration.
void BM_CpuEventRoundTrip(benchmark::State& state) {
  auto b = rt::make_cpu_backend();
  b->allocate_arena(4096);
  const rt::StreamHandle sa = b->create_stream("a"), sb = b->create_stream("b");
  const rt::EventHandle ea = b->create_event(), eb = b->create_event();
  for (auto _ : state) {
    b->launch(sa, [](const rt::KernelContext&) {}, {});
    b->record(ea, sa);
    b->wait(sb, ea);
    b->launch(sb, [](const rt::KernelContext&) {}, {});
    b->record(eb, sb);
    b->synchronize_event(eb);
  }
}
BENCHMARK(BM_CpuEventRoundTrip)->Unit(benchmark::kMicrosecond)->UseRealTime();

// Enqueue cost of an empty kernel, amortised over batches of 1000 (the stream drains each batch).
void BM_CpuStreamLaunch(benchmark::State& state) {
  auto b = rt::make_cpu_backend();
  b->allocate_arena(4096);
  const rt::StreamHandle s = b->create_stream("s");
  for (auto _ : state) {
    for (int i = 0; i < 1000; ++i) b->launch(s, [](const rt::KernelContext&) {}, {});
    b->synchronize_stream(s);
  }
  state.SetItemsProcessed(std::int64_t(state.iterations()) * 1000);
}
BENCHMARK(BM_CpuStreamLaunch)->Unit(benchmark::kMicrosecond)->UseRealTime();

// The same through the runtime, declaring one read and one write, with validate mode off (0)
// or on (1).
void BM_RuntimeLaunch(benchmark::State& state) {
  rt::RuntimeConfig c;
  c.arena_bytes = 1 << 20;
  c.page_bytes = 64 << 10;
  c.workspace_bytes = 64 << 10;
  c.live_bytes = 256 << 10;
  c.validate = state.range(0) != 0;
  rt::Runtime r(c);
  const rt::DeviceRegion x = r.scratch_alloc(4096, "bench", -1, "x");
  const rt::DeviceRegion y = r.scratch_alloc(4096, "bench", -1, "y");
  for (auto _ : state) {
    for (int i = 0; i < 1000; ++i)
      r.launch(r.compute(), "noop", {rt::reads(x), rt::writes(y)}, [](const rt::KernelContext&) {});
    r.host_wait(r.compute());
  }
  state.SetItemsProcessed(std::int64_t(state.iterations()) * 1000);
}
BENCHMARK(BM_RuntimeLaunch)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace
