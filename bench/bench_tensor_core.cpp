// Products per second of the H200 tensor-core model (engine/official/tensor_core.h) on the recorded
// projections' shapes with SynthInit operands: the audio FFN up-projection (126 x 2048 -> 8192)
// and the video Q projection (256 x 4096 -> 4096), on 1 and 2 threads; beside them psi's own
// float32 product on the same shape, and the scalar chain one output at a time. Each product also
// reports its FLOP/s (2·M·N·K a call) as a fraction of this CPU's FMA peak on the same threads
// (fma_peak.h), the peak measured before every timed call of the same run: `of_peak` is the
// median over the calls of the call's rate over the peak just before it. On one thread
// `of_peak_cpu` is the same ratio with both timed by the thread's CPU time, which the time other
// processes take from the core does not enter (a shared machine's wall times do). The context names the
// CPU, its vector extensions and the level in force (cpu_context.h); a lane kernel the CPU lacks
// is skipped.
#include <benchmark/benchmark.h>

#include <time.h>

#include <chrono>
#include <filesystem>
#include <vector>

#include "bench/cpu_context.h"
#include "bench/fma_peak.h"

#include "engine/official/tensor_core.h"
#include "engine/ops/gemm.h"
#include "engine/parallel.h"
#include "engine/synthinit.h"
#include "hdf5/h5.h"
#include "oracle/operands.h"
#include "probes/probe_cases.h"

namespace {

struct Shape {
  const char* name;
  std::int64_t M, K, N;
};

constexpr Shape kShapes[] = {{"audio-ff-up 126x2048->8192", 126, 2048, 8192},
                             {"video-q-proj 256x4096->4096", 256, 4096, 4096}};

struct Operands {
  psi::Bf16Tensor x, w, b;
};

double thread_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

// Times `product` by hand, one call an iteration, with the FMA peak on `threads` threads measured
// before each call, outside the timing. On one thread both run on this thread (parallel_for runs
// inline), so its CPU time times them too.
template <class Product>
void run_against_peak(benchmark::State& st, const Shape& s, int threads, Product&& product) {
  const psi::bench::PeakLoop loop = psi::bench::widest_peak_loop();
  const double flop = 2.0 * double(s.M) * double(s.N) * double(s.K);
  std::vector<double> rates, peaks, fractions, cpu_fractions;
  for (auto _ : st) {
    double peak_cpu = 0;
    if (loop.run) {
      const double c0 = thread_cpu_seconds();
      peaks.push_back(psi::bench::fma_peak_flops(loop, threads));
      peak_cpu = loop.flop_per_iteration * double(psi::bench::kPeakIterations) / (thread_cpu_seconds() - c0);
    }
    const double c0 = thread_cpu_seconds();
    const auto t0 = std::chrono::steady_clock::now();
    product();
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double cpu_secs = thread_cpu_seconds() - c0;
    st.SetIterationTime(secs);
    rates.push_back(flop / secs);
    if (loop.run) fractions.push_back(rates.back() / peaks.back());
    if (loop.run && threads == 1) cpu_fractions.push_back(flop / cpu_secs / peak_cpu);
  }
  st.SetItemsProcessed(st.iterations() * s.M * s.K * s.N);
  st.counters["GFLOPs"] = psi::bench::median(rates) * 1e-9;
  if (!loop.run) return;
  st.counters["peak_GFLOPs"] = psi::bench::median(peaks) * 1e-9;
  st.counters["of_peak"] = psi::bench::median(fractions);
  if (!cpu_fractions.empty()) st.counters["of_peak_cpu"] = psi::bench::median(cpu_fractions);
}

const Operands& operands(int i) {
  static const Operands o[2] = {
      {psi::synthinit::make("input.bench.x", {126, 2048}, 0), psi::synthinit::make("bench.up.weight", {8192, 2048}, 0),
       psi::synthinit::make("bench.up.bias", {8192}, 0)},
      {psi::synthinit::make("input.bench.x", {256, 4096}, 0), psi::synthinit::make("bench.q.weight", {4096, 4096}, 0),
       psi::synthinit::make("bench.q.bias", {4096}, 0)}};
  return o[i];
}

// Third argument: the lane kernel (tensor_core.h LaneKernel: 1 portable, 2 AVX2, 3 AVX-512, 4
// AVX-512 with FP32 products, 5 AVX2 double FMAs); a kernel the machine lacks is skipped.
void BM_TensorCoreLinear(benchmark::State& st) {
  const int i = int(st.range(0));
  const Shape& s = kShapes[i];
  const Operands& o = operands(i);
  const auto kernel = psi::official::tc::LaneKernel(st.range(2));
  if (!psi::official::tc::lane_kernel_available(kernel)) {
    st.SkipWithError("this machine lacks the lane kernel");
    return;
  }
  psi::official::tc::set_lane_kernel(kernel);
  const int threads = int(st.range(1));
  psi::set_thread_count(threads);
  run_against_peak(st, s, threads, [&] {
    auto y = psi::ops::linear(o.x, o.w, &o.b, psi::BiasRule::fused_f32, psi::ops::Product::h200_tensor_core);
    benchmark::DoNotOptimize(y.data.data());
  });
  psi::set_thread_count(0);
  psi::official::tc::set_lane_kernel(psi::official::tc::LaneKernel::best);
  static const char* kNames[] = {"best", "portable", "AVX2", "AVX-512", "AVX-512 FP32-product", "AVX2 double-FMA"};
  st.SetLabel(std::string(s.name) + ", " + kNames[st.range(2)] + " lanes, products/s");
}
BENCHMARK(BM_TensorCoreLinear)
    ->ArgsProduct({{0, 1}, {1, 2}, {1, 2, 3, 4, 5}})
    ->Unit(benchmark::kMillisecond)
    ->UseManualTime();

// The same on the recorded operands of ../shared/reference/probes_linear.h5 (first argument: 0
// the audio FFN up-projection's input rows, 1 the video Q projection's, each with its weight).
void BM_TensorCoreRecorded(benchmark::State& st) {
  const char* probe = st.range(0) == 0 ? "probe_audio_ff_up" : "probe_video_q_proj";
  const auto file = psi::probes::shared_dir() / "reference" / "probes_linear.h5";
  if (!std::filesystem::exists(file)) {
    st.SkipWithError("no recording");
    return;
  }
  const auto kernel = psi::official::tc::LaneKernel(st.range(2));
  if (!psi::official::tc::lane_kernel_available(kernel)) {
    st.SkipWithError("this machine lacks the lane kernel");
    return;
  }
  const psi::oracle::LinearProblem p = psi::oracle::load_probe(psi::hdf5::File::open_read(file), probe);
  const Shape s{probe, p.rows, p.K, p.N};
  psi::official::tc::set_lane_kernel(kernel);
  const int threads = int(st.range(1));
  psi::set_thread_count(threads);
  const psi::CBf16Mat x{p.x.data.data(), p.rows, p.K, p.K}, w{p.w.data.data(), p.N, p.K, p.K};
  std::vector<float> c(std::size_t(p.rows * p.N));
  run_against_peak(st, s, threads, [&] {
    std::fill(c.begin(), c.end(), 0.0f);
    psi::official::tc::gemm_accumulate(x, w, psi::F32Mat{c.data(), p.rows, p.N, p.N});
    benchmark::DoNotOptimize(c.data());
  });
  psi::set_thread_count(0);
  psi::official::tc::set_lane_kernel(psi::official::tc::LaneKernel::best);
  st.SetLabel(std::string(probe) + " recorded, lane kernel " + std::to_string(st.range(2)) + ", products/s");
}
BENCHMARK(BM_TensorCoreRecorded)
    ->ArgsProduct({{0, 1}, {1, 2}, {2, 3, 4, 5}})
    ->Unit(benchmark::kMillisecond)
    ->UseManualTime();

void BM_Float32Linear(benchmark::State& st) {
  const int i = int(st.range(0));
  const Shape& s = kShapes[i];
  const Operands& o = operands(i);
  const int threads = int(st.range(1));
  psi::set_thread_count(threads);
  run_against_peak(st, s, threads, [&] {
    auto y = psi::ops::linear(o.x, o.w, &o.b);
    benchmark::DoNotOptimize(y.data.data());
  });
  psi::set_thread_count(0);
  st.SetLabel(std::string(s.name) + ", psi float32 order, products/s");
}
// Second argument: threads.
BENCHMARK(BM_Float32Linear)->ArgsProduct({{0, 1}, {1, 2}})->Unit(benchmark::kMillisecond)->UseManualTime();

// The yardstick alone: FLOP/s of the FMA loop on 1 and 2 threads (median of five).
void BM_FmaPeak(benchmark::State& st) {
  const psi::bench::PeakLoop loop = psi::bench::widest_peak_loop();
  if (!loop.run) {
    st.SkipWithError("this CPU has neither AVX-512 nor AVX2 with FMA");
    return;
  }
  const int threads = int(st.range(0));
  psi::set_thread_count(threads);
  std::vector<double> peaks;
  for (auto _ : st)
    for (int i = 0; i < 5; ++i) peaks.push_back(psi::bench::fma_peak_flops(loop, threads));
  psi::set_thread_count(0);
  st.counters["peak_GFLOPs"] = psi::bench::median(peaks) * 1e-9;
  st.SetLabel(std::string(loop.isa) + " FMA loop, " + std::to_string(threads) + " thread(s)");
}
BENCHMARK(BM_FmaPeak)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_TensorCoreDot(benchmark::State& st) {
  const Operands& o = operands(1);
  std::span<const psi::Bf16> x(o.x.data.data(), 4096), w(o.w.data.data(), 4096);
  for (auto _ : st) benchmark::DoNotOptimize(psi::official::tc::dot(x, w));
  st.SetItemsProcessed(st.iterations() * 4096);
  st.SetLabel("one output, K=4096, scalar chain, products/s");
}
BENCHMARK(BM_TensorCoreDot)->Unit(benchmark::kMicrosecond);

}  // namespace
