// The PSI executor on the CPU backend: one LTX-2 AV block (tiny and small configs, default
// arena and row tile, baseline variant; 288 video tokens = the tiny trajectory's stage 2, 32
// audio tokens, 32 context rows) per schedule, against the host block (model::block_forward)
// on the same weights. Counters per run: row tile, declared S_live (the full-tile plan's), the
// block's own planned S_live, declared bound, measured managed peak (bytes), weight and journal
// bytes moved, journal reloads kept resident, blocking host synchronizations, weight tiles
// copied ahead of their consumer.
#include <benchmark/benchmark.h>

#include <memory>

#include "engine/exec/executor.h"
#include "engine/exec/tiling.h"
#include "engine/model/weights.h"
#include "engine/pipeline/checkpoint_weights.h"
#include "engine/pipeline/synthetic_block.h"

namespace exec = psi::exec;
namespace model = psi::model;
namespace pipeline = psi::pipeline;
namespace rt = psi::rt;

namespace {

struct Case {
  model::ModelConfig config;
  std::shared_ptr<psi::ckpt::SynthSource> weights;
  model::BlockInputs inputs;
  explicit Case(const char* name)
      : config(model::model_config(name)),
        weights(std::make_shared<psi::ckpt::SynthSource>(pipeline::synthetic_weights(config, 7))),
        inputs(pipeline::synthetic_block_inputs(config, {.frames = 2, .height = 12, .width = 12, .audio_tokens = 32, .context_rows = 32}, 8)) {}
};

const Case& case_of(int i) {
  static const Case tiny("tiny"), small("small");
  return i == 0 ? tiny : small;
}

void BM_PsiBlock(benchmark::State& state) {
  const Case& c = case_of(int(state.range(0)));
  const exec::Schedule& s = exec::schedules().at(std::size_t(state.range(1)));
  state.SetLabel(c.config.name + " " + s.name);
  const auto& v = model::numerics_variant("baseline");
  exec::BlockRun last;
  for (auto _ : state) {
    last = exec::run_block(c.config, *c.weights, 0, c.inputs, v, s, exec::default_arena(c.config), {});
    if (last.outcome != rt::Outcome::complete) {
      state.SkipWithError(last.failure.c_str());
      return;
    }
  }
  const rt::Counters& k = last.report.counters;
  state.counters["row_tile"] = double(exec::default_row_tile(c.config));
  state.counters["S_live"] = double(last.report.live_bytes);
  state.counters["plan_live"] = double(last.plan.scratch_bytes);
  state.counters["bound"] = double(last.report.bound);
  state.counters["peak"] = double(last.report.peak);
  state.counters["weights_h2d"] = double(k.h2d(rt::CopyKind::weights));
  state.counters["journal_h2d"] = double(k.h2d(rt::CopyKind::journal));
  state.counters["journal_d2h"] = double(k.d2h(rt::CopyKind::journal));
  state.counters["resident"] = double(k.journal_kept_resident);
  state.counters["syncs"] = double(k.blocking_syncs);
  state.counters["tiles"] = double(k.weight_tiles);
  state.counters["ahead"] = double(last.exec.tiles_copied_ahead);
}
BENCHMARK(BM_PsiBlock)->ArgsProduct({{0, 1}, {0, 1, 2, 3}})->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_HostBlock(benchmark::State& state) {
  const Case& c = case_of(int(state.range(0)));
  state.SetLabel(c.config.name + " model::block_forward");
  pipeline::CheckpointWeights src(c.weights);
  const model::BlockWeights w = model::load_block_weights(src, c.config, 0);
  const auto& v = model::numerics_variant("baseline");
  for (auto _ : state) benchmark::DoNotOptimize(model::block_forward(c.config, w, c.inputs, v));
}
BENCHMARK(BM_HostBlock)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
