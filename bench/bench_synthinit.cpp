#include <benchmark/benchmark.h>

#include "engine/synthinit.h"

// Fills the largest block matrix (4096 x 16384, the video FFN down-projection) on one core.
static void BM_SynthInitFill(benchmark::State& state) {
  psi::Shape shape{4096, 16384};
  psi::Bf16Tensor t(shape);
  for (auto _ : state) {
    psi::synthinit::fill("transformer_blocks.0.ff.net.2.weight", shape, 0, t.span());
    benchmark::DoNotOptimize(t.data.data());
  }
  state.SetItemsProcessed(state.iterations() * t.numel());
  state.counters["elements/s"] = benchmark::Counter(double(t.numel()), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_SynthInitFill)->Unit(benchmark::kMillisecond);
