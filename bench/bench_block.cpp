// One AV block on the CPU, per model config and numerics variant: tiny (the recorded tiny
// model's block, 72 video / 18 audio tokens) and small (the block_small recording's shape, 616
// video / 126 audio tokens, one-row contexts), SynthInit weights and inputs.
#include <benchmark/benchmark.h>

#include "engine/model/block.h"
#include "engine/pipeline/positions.h"

namespace {

struct Case {
  const char* config;
  std::int64_t frames, height, width, audio_tokens;
};

constexpr Case kCases[] = {{"tiny", 3, 4, 6, 18}, {"small", 4, 11, 14, 126}};

void BM_Block(benchmark::State& state) {
  const Case& k = kCases[state.range(0)];
  const std::string variant = psi::model::numerics_variant_names().at(state.range(1));
  const psi::model::ModelConfig c = psi::model::model_config(k.config);
  psi::model::SynthInitSource src(0);
  const psi::model::BlockWeights w = psi::model::load_block_weights(src, c, 0);
  const psi::model::BlockInputs in = psi::model::synthetic_block_inputs(
      c, psi::pipeline::video_positions(k.frames, k.height, k.width, 24.0f),
      psi::pipeline::audio_positions(k.audio_tokens), 1, 0);
  const auto& v = psi::model::numerics_variant(variant);
  for (auto _ : state) {
    psi::model::BlockTaps p = psi::model::block_forward(c, w, in, v);
    benchmark::DoNotOptimize(p.video_out.data.data());
  }
  state.SetLabel(std::string(k.config) + "/" + variant);
}

}  // namespace

BENCHMARK(BM_Block)->ArgsProduct({{0, 1}, {0, 1, 2}})->Unit(benchmark::kMillisecond);
