// The official SDPA cores alone, at the full-size block's longest rows (4,928 video tokens
// attending to themselves, one 128-channel head; the block runs 32 such heads) and at the
// small block's: where the MATH core's two FP32 FMA-chain products and its softmax rows
// spend their time, without the projections around them. SynthInit-like values in [−2, 2).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <vector>

#include "engine/bf16.h"
#include "engine/matrix.h"
#include "engine/official/attention_math.h"

namespace {

struct Operands {
  std::vector<psi::Bf16> q, k, v, out;
};

Operands operands(std::int64_t tokens, std::int64_t d) {
  std::mt19937 gen(7);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  Operands o;
  for (auto* t : {&o.q, &o.k, &o.v}) {
    t->resize(tokens * d);
    for (auto& x : *t) x = psi::bf16_rne(u(gen));
  }
  o.out.resize(tokens * d);
  return o;
}

void BM_SdpaMath(benchmark::State& state) {
  const std::int64_t n = state.range(0), d = 128;
  Operands o = operands(n, d);
  for (auto _ : state) {
    psi::official::sdpa_math_h200({o.q.data(), n, d, d}, {o.k.data(), n, d, d}, {o.v.data(), n, d, d}, 1, nullptr, 0,
                                  psi::official::ExpModel::ex2_table, {o.out.data(), n, d, d}, nullptr);
    benchmark::DoNotOptimize(o.out.data());
  }
  // Both products' FMAs: n·n·d for the scores, as many for P·V.
  state.counters["GFMA/s"] = benchmark::Counter(double(2 * n * n * d), benchmark::Counter::kIsIterationInvariantRate,
                                                benchmark::Counter::kIs1000);
}

}  // namespace

BENCHMARK(BM_SdpaMath)->Arg(616)->Arg(4928)->Unit(benchmark::kMillisecond)->UseRealTime();
