// Products per second of the oracle's exact paths: the fixed-point tensor path (what
// `psi oracle certify` runs), the same path one element at a time, and the GMP and Boost
// rational paths. Operands are SynthInit tensors of the video to_q projection's scale.
#include <benchmark/benchmark.h>

#include "engine/synthinit.h"
#include "oracle/exact_boost.h"
#include "oracle/exact_gmp.h"
#include "oracle/fixed_dot.h"

namespace {

namespace po = psi::oracle;
constexpr std::int64_t K = 4096;

struct Operands {
  psi::Bf16Tensor x = psi::synthinit::make("input.bench.x", {16, K}, 0);
  psi::Bf16Tensor w = psi::synthinit::make("bench.proj.weight", {256, K}, 0);
  psi::Bf16Tensor b = psi::synthinit::make("bench.proj.bias", {256}, 0);
};

const Operands& ops() {
  static const Operands o;
  return o;
}

void BM_FixedTensor(benchmark::State& st) {
  const auto& o = ops();
  const int threads = int(st.range(0));
  for (auto _ : st) {
    auto y = po::correctly_rounded_linear(o.x.data, o.w.data, o.b.data, K, 0, 16, threads);
    benchmark::DoNotOptimize(y.data.data());
  }
  st.SetItemsProcessed(st.iterations() * 16 * 256 * K);
  st.SetLabel("16x256 outputs, K=4096, products/s");
}
BENCHMARK(BM_FixedTensor)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_FixedElement(benchmark::State& st) {
  const auto& o = ops();
  std::span<const psi::Bf16> x(o.x.data.data(), K), w(o.w.data.data(), K);
  for (auto _ : st) {
    auto s = po::exact_dot_fixed(x, w, o.b.data[0]);
    benchmark::DoNotOptimize(s.round_bf16());
  }
  st.SetItemsProcessed(st.iterations() * K);
}
BENCHMARK(BM_FixedElement)->Unit(benchmark::kMicrosecond);

void BM_Gmp(benchmark::State& st) {
  const auto& o = ops();
  std::span<const psi::Bf16> x(o.x.data.data(), K), w(o.w.data.data(), K);
  for (auto _ : st) {
    mpq_class q = po::exact_dot_gmp(x, w, o.b.data[0]);
    benchmark::DoNotOptimize(q.get_mpq_t());
  }
  st.SetItemsProcessed(st.iterations() * K);
}
BENCHMARK(BM_Gmp)->Unit(benchmark::kMillisecond);

void BM_Boost(benchmark::State& st) {
  const auto& o = ops();
  std::span<const psi::Bf16> x(o.x.data.data(), K), w(o.w.data.data(), K);
  for (auto _ : st) {
    auto q = po::exact_dot_boost(x, w, o.b.data[0]);
    benchmark::DoNotOptimize(q);
  }
  st.SetItemsProcessed(st.iterations() * K);
}
BENCHMARK(BM_Boost)->Unit(benchmark::kMillisecond);

}  // namespace
