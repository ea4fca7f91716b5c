#pragma once
// The distilled two-stage 8+3 run (spec §6) with the recorded trajectory_tiny conventions:
// SynthInit noise under the recording's names, the ancestral stage-1 sampler of LTX-2.5
// (deterministic Euler for ltx2), the nearest-neighbour 2x upsampler stand-in re-noised at the
// first stage-2 sigma, deterministic Euler in stage 2. Thirteen states are kept (the initial
// state, 8 stage-1 outputs, the inter-stage state, 3 stage-2 outputs), as the recording does.
// The same run exists in float64 (run_trajectory_f64), from one definition of the loop.
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "engine/model/block.h"
#include "engine/model/config.h"
#include "engine/model/variant.h"
#include "engine/model/weights.h"

namespace psi::pipeline {

// Sigma schedules of the distilled pipeline (float32), spec §6.1.
const std::vector<float>& stage1_sigmas();
const std::vector<float>& stage2_sigmas();

struct TrajectoryShape {
  std::int64_t frames = 0, height = 0, width = 0;  // stage-1 video latent grid (stage 2: 2H x 2W)
  std::int64_t audio_tokens = 0;
  float fps = 24.0f;
};
// The grid the recordings use for a config: tiny/small (3x4x6 -> 3x8x12, 18 audio tokens) and
// ltx2-22b (the paper's 704x448x121: 16x7x11 -> 16x14x22, 126 audio tokens).
TrajectoryShape trajectory_shape(const model::ModelConfig& c);

// Where a run's inputs come from: SynthInit tensors "input.<noise_name>.noise.…" drawn with
// noise_seed (the request seed) and "input.<context_name>.{video,audio}.context" drawn with
// context_seed. The recorded trajectory_tiny uses one name and seed for both.
struct TrajectoryCase {
  std::string noise_name;
  std::string context_name;
  std::int64_t context_len = 1;
  std::uint64_t noise_seed = 0;
  std::uint64_t context_seed = 0;
};

template <class E>
struct SavedStateOf {
  std::string name;  // "00_stage1_initial" … "12_stage2_step3", as in the recordings
  float sigma_from = 0, sigma_to = 0;
  Tensor<E> video, audio;
};
using SavedState = SavedStateOf<Bf16>;
using SavedStateF64 = SavedStateOf<double>;

struct Invocation {
  int stage = 0, step = 0;
  double wall_seconds = 0;
};

template <class E>
struct TrajectoryResultOf {
  std::vector<SavedStateOf<E>> states;
  std::vector<Invocation> invocations;
};
using TrajectoryResult = TrajectoryResultOf<Bf16>;
using TrajectoryResultF64 = TrajectoryResultOf<double>;

struct TrajectoryHooks {
  // Before each transformer invocation (stage, step, total steps) and after each block.
  std::function<void(int stage, int step, int block, int blocks)> on_block;
  // Teacher forcing: called before the step that produces state i (1..8, 10..12); a non-null
  // result replaces the run's own state i-1 as that step's start (the recorded state i-1).
  std::function<const SavedState*(int index)> teacher;
  // One step alone (1..8, 10..12; 0: the whole run): the steps before it are not run, its start
  // state is the teacher's (required), and the result holds only the state it produces.
  int only_step = 0;
  // Runs the blocks (see model.h); empty: host block_forward. The float64 run takes none.
  std::function<model::BlockTaps(int index, const model::BlockInputs& in)> block_runner;
};


// The inputs of block 0 at the first invocation of `stage` (1 or 2): the stage's noise as the
// latent (for stage 2 the pure stage-2 noise stands in for the re-noised upsampled state), the
// stage's first sigma and token grid. What the single-block experiments run.
model::BlockInputs first_block_inputs(const model::ModelConfig& c, model::TensorSource& weights,
                                      const TrajectoryCase& tc, int stage);

TrajectoryResult run_trajectory(const model::ModelConfig& c, model::TensorSource& weights,
                                const TrajectoryCase& tc, const model::NumericsVariant& variant,
                                const TrajectoryHooks& hooks = {});

// The float64 reference trajectory: the same run with the model in float64
// (model_forward_f64) and the sampler's float64 overloads, from the same BF16 weights, noise and
// contexts; no BF16 write anywhere. A teacher's (BF16) state enters exactly.
TrajectoryResultF64 run_trajectory_f64(const model::ModelConfig& c, model::TensorSource& weights,
                                       const TrajectoryCase& tc, const TrajectoryHooks& hooks = {});

}  // namespace psi::pipeline
