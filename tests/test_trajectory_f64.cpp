// The float64 reference trajectory (engine/pipeline/trajectory.h, run_trajectory_f64) on the
// tiny config with the recorded trajectory_tiny's inputs: the dense BF16 run and the recorded
// official states are within their BF16 error of it and that bound catches a misplaced operand;
// it starts exactly where the BF16 run starts, follows a teacher, is deterministic and writes no
// BF16 value; its model-level pieces computed in double round to the official float32 ones.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <tuple>
#include <utility>
#include <vector>

#include "engine/bf16_f64.h"
#include "engine/model/block_f64.h"
#include "engine/model/variant.h"
#include "engine/ops/rope.h"
#include "engine/pipeline/positions.h"
#include "engine/pipeline/timestep.h"
#include "engine/pipeline/trajectory.h"
#include "experiments/trajectory_support.h"
#include "engine/distance.h"
#include "tests/recordings.h"

namespace fs = std::filesystem;
using namespace psi;

namespace {

const exp::RecordedTrajectory& recorded() {
  static const exp::RecordedTrajectory r = exp::read_recorded_trajectory(
      psi::test::reference_file("probe_attn_traj.h5"), "trajectory_tiny");
  return r;
}

const model::ModelConfig& tiny() {
  static const model::ModelConfig c = model::model_config("tiny");
  return c;
}

pipeline::TrajectoryCase tiny_case() {
  return {"trajectory_tiny", "trajectory_tiny", 1, recorded().seed, recorded().seed};
}

pipeline::TrajectoryHooks teacher() {
  pipeline::TrajectoryHooks h;
  h.teacher = [](int k) { return &recorded().states.at(std::size_t(k - 1)); };
  return h;
}

pipeline::TrajectoryResultF64 run_f64(const pipeline::TrajectoryHooks& hooks = {}) {
  model::SynthInitSource w(recorded().seed);
  return pipeline::run_trajectory_f64(tiny(), w, tiny_case(), hooks);
}

const pipeline::TrajectoryResultF64& free_f64() {
  static const pipeline::TrajectoryResultF64 r = run_f64();
  return r;
}

pipeline::TrajectoryResult run_dense(const pipeline::TrajectoryHooks& hooks = {}) {
  model::SynthInitSource w(recorded().seed);
  return pipeline::run_trajectory(tiny(), w, tiny_case(), model::numerics_variant("dense"), hooks);
}

// Relative L2 of a BF16 tensor to a float64 one, in double (engine/distance.h).
double rel_l2(const Bf16Tensor& ours, const F64Tensor& ref) {
  return psi::distance(ours.span(), std::span<const double>(ref.data)).rel_l2;
}

// A state is the last BF16 write of a step, so the BF16 runs carry at least its rounding error
// (1.56e-3 to 1.70e-3 relative L2 here), plus what their velocity errors add through the sampler:
// measured at most 4.7e-3 free-running and 3.4e-3 teacher-forced for every path
// (docs/results.md, one-token), the recorded official run alike. The block's own bound (test_block_f64) is 1e-2,
// and a state does not amplify its velocity's error (the sampler's coefficients are at most 1
// per step); 1e-2 leaves room, a misplaced operand is far above it (below).
constexpr double kBound = 1e-2;

// Every state of `ours` within kBound of the float64 run, and no closer than the float64 state
// correctly rounded to BF16 (the nearest BF16 tensor to it, element by element).
void expect_within_bound(const std::vector<pipeline::SavedState>& ours, const pipeline::TrajectoryResultF64& ref,
                         const char* what) {
  ASSERT_EQ(ours.size(), ref.states.size()) << what;
  for (std::size_t i = 0; i < ours.size(); ++i) {
    const auto& s = ref.states[i];
    ASSERT_EQ(ours[i].name, s.name);
    for (auto [b, f, stream] : {std::tuple{&ours[i].video, &s.video, "video"}, std::tuple{&ours[i].audio, &s.audio, "audio"}}) {
      const double e = rel_l2(*b, *f), floor = rel_l2(model::round_to_bf16(*f), *f);
      EXPECT_LT(e, kBound) << what << " " << s.name << " " << stream;
      EXPECT_GE(e, floor) << what << " " << s.name << " " << stream;
    }
  }
}

// The output heads' shift and scale rows swapped: an operand mix-up the float64 model must not
// make.
class SwappedHead : public model::TensorSource {
 public:
  explicit SwappedHead(std::uint64_t seed) : inner_(seed) {}
  Bf16Tensor load(const std::string& name, const Shape& shape) override {
    Bf16Tensor t = inner_.load(name, shape);
    if (name == "scale_shift_table" || name == "audio_scale_shift_table")
      for (std::int64_t j = 0; j < shape[1]; ++j) std::swap(t.data[j], t.data[shape[1] + j]);
    return t;
  }
  std::string describe() const override { return "swapped head " + inner_.describe(); }

 private:
  model::SynthInitSource inner_;
};

}  // namespace

TEST(TrajectoryF64, DenseAndOfficialAreWithinTheirBf16ErrorOfIt) {
  expect_within_bound(run_dense().states, free_f64(), "dense free-running");
  expect_within_bound(recorded().states, free_f64(), "official (recorded)");
  expect_within_bound(run_dense(teacher()).states, run_f64(teacher()), "dense teacher-forced");
}

TEST(TrajectoryF64, TheBoundCatchesAMisplacedOperand) {
  SwappedHead w(recorded().seed);
  const pipeline::TrajectoryResultF64 wrong = pipeline::run_trajectory_f64(tiny(), w, tiny_case());
  const pipeline::TrajectoryResult dense = run_dense();
  EXPECT_GT(rel_l2(dense.states.back().video, wrong.states.back().video), 10 * kBound);
  EXPECT_GT(rel_l2(dense.states.back().audio, wrong.states.back().audio), 10 * kBound);
}

// State 0 is the stage-1 noise in both runs, exactly; with a teacher, step 1 starts from the
// same recorded state 0 (the noise) and gives the free run's state 1 bit for bit, and every later
// step starts from a recorded state instead of its own.
TEST(TrajectoryF64, StartsWhereTheBf16RunStartsAndFollowsATeacher) {
  const pipeline::TrajectoryResultF64& f = free_f64();
  ASSERT_EQ(f.states.size(), 13u);
  EXPECT_EQ(f.states[0].video.data, model::to_f64(recorded().states[0].video).data);
  EXPECT_EQ(f.states[0].audio.data, model::to_f64(recorded().states[0].audio).data);
  const pipeline::TrajectoryResultF64 forced = run_f64(teacher());
  EXPECT_EQ(forced.states[1].video.data, f.states[1].video.data);
  EXPECT_EQ(forced.states[1].audio.data, f.states[1].audio.data);
  for (std::size_t i = 2; i < f.states.size(); ++i) EXPECT_NE(forced.states[i].video.data, f.states[i].video.data) << i;
  EXPECT_EQ(f.invocations.size(), 11u);
}

TEST(TrajectoryF64, DeterministicAndWritesNoBf16) {
  const pipeline::TrajectoryResultF64 again = run_f64();
  const pipeline::TrajectoryResultF64& f = free_f64();
  for (std::size_t i = 0; i < f.states.size(); ++i) {
    EXPECT_EQ(again.states[i].video.data, f.states[i].video.data) << f.states[i].name;
    EXPECT_EQ(again.states[i].audio.data, f.states[i].audio.data) << f.states[i].name;
    if (i == 0) continue;  // the noise itself
    // A value that went through a BF16 write last is BF16-representable; a float64 result almost
    // never is.
    std::int64_t representable = 0;
    for (double v : f.states[i].video.data) {
      ASSERT_TRUE(std::isfinite(v)) << f.states[i].name;
      representable += double(bf16_of_f64(v).to_float()) == v ? 1 : 0;
    }
    EXPECT_LT(representable * 100, f.states[i].video.numel()) << f.states[i].name;
  }
}

// The model-level values computed in double instead of float32 (the timestep sinusoid, the RoPE
// tables) are the official float32 ones up to float32's rounding of the angle: an angle ω·a of
// up to 5000π rad is off by up to about 3·2^-24 of itself in float32 (ω, a and the product each
// rounded), 2.8e-3 rad; the BF16 tables add half a BF16 step of 1 (2^-9).
TEST(TrajectoryF64, DoublePiecesRoundToTheOfficialOnes) {
  for (float tau : {1000.0f, 993.75f, 421.875f}) {
    const std::vector<float> f = pipeline::timestep_sinusoid(tau);
    const std::vector<double> d = pipeline::timestep_sinusoid(double(tau));
    ASSERT_EQ(f.size(), d.size());
    // arg_i = tau·e_i up to 1000 rad: float32 rounding of the argument moves cos/sin by ≤ 1000·2^-24.
    for (std::size_t i = 0; i < f.size(); ++i) EXPECT_NEAR(f[i], d[i], 1e-4) << tau << " " << i;
  }
  const model::ModelConfig& c = tiny();
  const F32Tensor vp = pipeline::video_positions(3, 8, 12, 24.0f), ap = pipeline::audio_positions(18);
  const model::BlockRope bf = model::block_rope(c, vp, ap);
  const auto f64 = model::block_rope_f64(c, vp, ap);
  std::int64_t total = 0, differing = 0;
  double worst = 0;
  for (auto [b, d] : {std::pair{&bf.video, &f64.video}, std::pair{&bf.audio, &f64.audio},
                      std::pair{&bf.video_cross, &f64.video_cross}, std::pair{&bf.audio_cross, &f64.audio_cross}}) {
    for (auto [bt, dt] : {std::pair{&b->cos, &d->cos}, std::pair{&b->sin, &d->sin}}) {
      ASSERT_EQ(bt->shape, dt->shape);
      const Bf16Tensor r = model::round_to_bf16(*dt);
      for (std::int64_t i = 0; i < r.numel(); ++i) {
        ++total;
        differing += r.data[i].bits == bt->data[i].bits ? 0 : 1;
        worst = std::max(worst, std::fabs(dt->data[i] - bt->data[i].to_float()));
      }
    }
  }
  EXPECT_GT(total, 0);
  EXPECT_LT(worst, 2.8e-3 + std::ldexp(1.0, -9));
  EXPECT_GT(differing, 0);  // computed in double, not a copy of the float32 tables
  EXPECT_LT(differing * 10, total);
  std::printf("RoPE tables: %lld of %lld BF16 entries differ from the rounded float64 ones, max |diff| %.3g\n",
              (long long)differing, (long long)total, worst);
}

// The distance the one-token report uses against the float64 states: relative L2 to the float64
// values, differing elements and ULPs against their correct rounding.
TEST(TrajectoryF64, DistanceToFloat64CountsAgainstTheRounding) {
  // Just above the midpoint of 1 and 1 + 2^-7 (so close that float32 would land on it and tie
  // down to 1): rounds up.
  const std::vector<double> ref{1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -30), -2.5, 0.1};
  std::vector<Bf16> ours{bf16_of_f64(ref[0]), bf16_of_f64(ref[1]), bf16_of_f64(ref[2])};
  EXPECT_EQ(ours[0].bits, 0x3f81);
  psi::Distance d = psi::distance(ours, ref);
  EXPECT_EQ(d.differing, 0);
  EXPECT_GT(d.rel_l2, 0.0);
  ours[0] = Bf16{0x3f80};  // the other neighbour, one step from the rounding
  d = psi::distance(ours, ref);
  EXPECT_EQ(d.differing, 1);
  EXPECT_EQ(d.max_ulp_same_sign, 1);
  EXPECT_EQ(d.sign_flips, 0);
  EXPECT_EQ(d.total, 3);
}
