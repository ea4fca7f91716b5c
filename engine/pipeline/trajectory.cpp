#include "engine/pipeline/trajectory.h"

#include <type_traits>

#include "engine/error.h"
#include "engine/interrupt.h"
#include "engine/pipeline/forward.h"
#include "engine/pipeline/positions.h"
#include "engine/pipeline/sampler.h"
#include "engine/progress.h"
#include "engine/synthinit.h"

namespace psi::pipeline {

const std::vector<float>& stage1_sigmas() {
  static const std::vector<float> s{1.0f, 0.99375f, 0.9875f, 0.98125f, 0.975f, 0.909375f, 0.725f, 0.421875f, 0.0f};
  return s;
}

const std::vector<float>& stage2_sigmas() {
  static const std::vector<float> s{0.909375f, 0.725f, 0.421875f, 0.0f};
  return s;
}

TrajectoryShape trajectory_shape(const model::ModelConfig& c) {
  if (c.name == "ltx2-22b") return {16, 7, 11, 126, 24.0f};
  return {3, 4, 6, 18, 24.0f};
}

namespace {

Bf16Tensor noise(const TrajectoryCase& c, const std::string& what, const Shape& shape) {
  return synthinit::make("input." + c.noise_name + ".noise." + what, shape, c.noise_seed);
}

Bf16Tensor context(const TrajectoryCase& c, const std::string& stream, const Shape& shape) {
  return synthinit::make("input." + c.context_name + "." + stream + ".context", shape, c.context_seed);
}

struct Stage {
  int index;                  // 1 or 2
  std::int64_t frames, height, width;
  const std::vector<float>* sigmas;
  bool ancestral;
};

// A BF16 tensor (noise, a teacher's state) as the run's element type, exactly.
template <class E>
Tensor<E> as(const Bf16Tensor& t) {
  if constexpr (std::is_same_v<E, Bf16>)
    return t;
  else
    return model::to_f64(t);
}

// The run, over the element type E. forward(video, audio, on_block) is one transformer
// invocation; on_block(block index) is empty when the hooks have no on_block. `math`: the token
// positions' divisions (positions.h).
template <class E, class Forward>
TrajectoryResultOf<E> trajectory(const model::ModelConfig& c, const TrajectoryCase& tc, const TrajectoryHooks& hooks,
                                 official::F32Math math, const Forward& forward) {
  const TrajectoryShape ts = trajectory_shape(c);
  const std::int64_t ch = c.in_channels, ach = c.audio_in_channels;
  const Shape audio_shape{1, ts.audio_tokens, ach};
  ModalityInputOf<E> video, audio;
  video.context = context(tc, "video", {1, tc.context_len, c.cross_attention_dim});
  audio.context = context(tc, "audio", {1, tc.context_len, c.audio_cross_attention_dim});
  audio.positions = audio_positions(ts.audio_tokens, math);

  const int only = hooks.only_step;
  if (only != 0 && (only < 1 || only > 12 || only == 9 || !hooks.teacher))
    throw Error("trajectory: step " + std::to_string(only) +
                " alone needs a step index 1..8 or 10..12 and a teacher for its start state");
  TrajectoryResultOf<E> result;
  // The state index the next push gets (only_step keeps just its own state).
  int index = 0;
  auto keep = [&](SavedStateOf<E> s) {
    if (only == 0 || index == only) result.states.push_back(std::move(s));
    ++index;
  };
  // The initial latent is zero and the noise scale 1, so the noised state is the noise itself.
  Tensor<E> xv = as<E>(noise(tc, "stage1.video", {1, ts.frames * ts.height * ts.width, ch}));
  Tensor<E> xa = as<E>(noise(tc, "stage1.audio", audio_shape));
  const float first = stage1_sigmas().front();
  keep({"00_stage1_initial", first, first, xv, xa});

  const Stage stages[2] = {
      {1, ts.frames, ts.height, ts.width, &stage1_sigmas(), c.features.ancestral_stage1},
      {2, ts.frames, 2 * ts.height, 2 * ts.width, &stage2_sigmas(), false}};
  for (const Stage& st : stages) {
    if (st.index == 2) {
      const float renoise = stage2_sigmas().front();
      Tensor<E> up = upsample_nearest2x(xv, ts.frames, ts.height, ts.width);
      xv = noise_latent(up, as<E>(noise(tc, "stage2.video", up.shape)), renoise);
      xa = noise_latent(xa, as<E>(noise(tc, "stage2.audio", audio_shape)), renoise);
      keep({"09_inter_stage", renoise, renoise, xv, xa});
    }
    video.positions = video_positions(st.frames, st.height, st.width, ts.fps, math);
    video.first_frame_tokens = st.height * st.width;
    const auto& sig = *st.sigmas;
    const int steps = int(sig.size()) - 1;
    for (int k = 0; k < steps; ++k) {
      if (only != 0 && index != only) {
        if (index > only) return result;
        ++index;
        continue;
      }
      if (hooks.teacher) {
        if (const SavedState* t = hooks.teacher(index)) {
          xv = as<E>(t->video);
          xa = as<E>(t->audio);
        } else if (only != 0) {
          throw Error("trajectory: step " + std::to_string(only) + " alone has no teacher state to start from");
        }
      }
      check_interrupt("stage " + std::to_string(st.index) + " step " + std::to_string(k + 1));
      const float sigma = sig[k], next = sig[k + 1];
      video.latent = xv;
      audio.latent = xa;
      video.sigma = audio.sigma = sigma;
      const auto t0 = std::chrono::steady_clock::now();
      std::function<void(int)> on_block;
      if (hooks.on_block) on_block = [&](int b) { hooks.on_block(st.index, k + 1, b + 1, int(c.layers)); };
      ModelOutputOf<E> out = forward(video, audio, on_block);
      result.invocations.push_back(
          {st.index, k + 1, seconds_since(t0)});
      Tensor<E> x0v = to_denoised(xv, out.video_velocity, sigma);
      Tensor<E> x0a = to_denoised(xa, out.audio_velocity, sigma);
      if (st.ancestral) {
        Tensor<E> nv, na;
        if (next != 0.0f) {
          const std::string step = "stage1.step" + std::to_string(k + 1);
          nv = as<E>(noise(tc, step + ".video", xv.shape));
          na = as<E>(noise(tc, step + ".audio", xa.shape));
        }
        xv = ancestral_step(xv, x0v, sigma, next, nv);
        xa = ancestral_step(xa, x0a, sigma, next, na);
      } else {
        xv = euler_step(xv, x0v, sigma, next);
        xa = euler_step(xa, x0a, sigma, next);
      }
      char name[32];
      std::snprintf(name, sizeof name, "%02d_stage%d_step%d", index, st.index, k + 1);
      keep({name, sigma, next, xv, xa});
    }
  }
  return result;
}

}  // namespace

model::BlockInputs first_block_inputs(const model::ModelConfig& c, model::TensorSource& weights,
                                      const TrajectoryCase& tc, int stage) {
  if (stage != 1 && stage != 2) throw Error("first_block_inputs: stage " + std::to_string(stage) + " is not 1 or 2");
  const TrajectoryShape ts = trajectory_shape(c);
  const std::int64_t h = stage == 1 ? ts.height : 2 * ts.height, w = stage == 1 ? ts.width : 2 * ts.width;
  const std::string s = "stage" + std::to_string(stage);
  ModalityInput video, audio;
  video.latent = noise(tc, s + ".video", {1, ts.frames * h * w, c.in_channels});
  audio.latent = noise(tc, s + ".audio", {1, ts.audio_tokens, c.audio_in_channels});
  video.sigma = audio.sigma = (stage == 1 ? stage1_sigmas() : stage2_sigmas()).front();
  video.positions = video_positions(ts.frames, h, w, ts.fps);
  video.first_frame_tokens = h * w;
  audio.positions = audio_positions(ts.audio_tokens);
  video.context = context(tc, "video", {1, tc.context_len, c.cross_attention_dim});
  audio.context = context(tc, "audio", {1, tc.context_len, c.audio_cross_attention_dim});
  return prepare_inputs(c, weights, video, audio).blocks;
}

TrajectoryResult run_trajectory(const model::ModelConfig& c, model::TensorSource& weights,
                                const TrajectoryCase& tc, const model::NumericsVariant& variant,
                                const TrajectoryHooks& hooks) {
  return trajectory<Bf16>(c, tc, hooks, variant.model_math,
                          [&](const ModalityInput& video, const ModalityInput& audio, const std::function<void(int)>& on_block) {
                            BlockHook hook;
                            if (on_block) hook = [&](int b, const model::BlockTaps&) { on_block(b); };
                            return model_forward(c, weights, video, audio, variant, hook, hooks.block_runner);
                          });
}

TrajectoryResultF64 run_trajectory_f64(const model::ModelConfig& c, model::TensorSource& weights,
                                       const TrajectoryCase& tc, const TrajectoryHooks& hooks) {
  if (hooks.block_runner) throw Error("run_trajectory_f64: the float64 run has no block runner");
  return trajectory<double>(c, tc, hooks, official::F32Math::host,
                            [&](const ModalityInputOf<double>& video, const ModalityInputOf<double>& audio,
                                const std::function<void(int)>& on_block) {
                              return model_forward_f64(c, weights, video, audio, on_block);
                            });
}

}  // namespace psi::pipeline
