// Model-level pieces and the 8+3 trajectory on the tiny config, against the recorded official
// trajectory_tiny, plus the pinned SHA-256 of every saved state of the one-token run.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "engine/model/variant.h"
#include "engine/pipeline/positions.h"
#include "engine/pipeline/sampler.h"
#include "engine/pipeline/trajectory.h"
#include "engine/sha256.h"
#include "experiments/trajectory_support.h"
#include "hdf5/h5.h"
#include "engine/distance.h"
#include "tests/recordings.h"

namespace fs = std::filesystem;
using namespace psi;

namespace {

fs::path ref(const char* f) { return psi::test::reference_file(f); }

std::int64_t ulp_differences(const F32Tensor& a, const F32Tensor& b, std::int64_t& max_ulp) {
  std::int64_t n = 0;
  max_ulp = 0;
  for (std::int64_t i = 0; i < a.numel(); ++i) {
    const auto ia = std::bit_cast<std::int32_t>(a.data[i]), ib = std::bit_cast<std::int32_t>(b.data[i]);
    if (ia != ib) ++n;
    max_ulp = std::max<std::int64_t>(max_ulp, std::abs(std::int64_t(ia) - ib));
  }
  return n;
}

const exp::RecordedTrajectory& recorded() {
  static const exp::RecordedTrajectory r = exp::read_recorded_trajectory(ref("probe_attn_traj.h5"), "trajectory_tiny");
  return r;
}

pipeline::TrajectoryResult run_tiny(const std::string& variant, const pipeline::TrajectoryHooks& hooks = {}) {
  const model::ModelConfig c = model::model_config("tiny");
  model::SynthInitSource w(recorded().seed);
  pipeline::TrajectoryCase tc{"trajectory_tiny", "trajectory_tiny", 1, recorded().seed, recorded().seed};
  return pipeline::run_trajectory(c, w, tc, model::numerics_variant(variant), hooks);
}

}  // namespace

// The CPU recipe reproduces the official GPU positions up to one float32 ULP, in exactly as
// many elements as the reference README reports (462 of 3,696 video, 140 of 252 audio).
TEST(Positions, MatchRecordedWithinOneUlp) {
  auto f = hdf5::File::open_read(ref("block_small.h5"));
  std::int64_t max_ulp = 0;
  const F32Tensor v = pipeline::video_positions(4, 11, 14, 24.0f);
  const F32Tensor rv = f.read_f32("/block_small/inputs/video.positions");
  ASSERT_EQ(v.shape, rv.shape);
  EXPECT_EQ(ulp_differences(v, rv, max_ulp), 462);
  EXPECT_EQ(max_ulp, 1);
  const F32Tensor a = pipeline::audio_positions(126);
  const F32Tensor ra = f.read_f32("/block_small/inputs/audio.positions");
  ASSERT_EQ(a.shape, ra.shape);
  EXPECT_EQ(ulp_differences(a, ra, max_ulp), 140);
  EXPECT_EQ(max_ulp, 1);
}

TEST(Sampler, UpsampleRepeatsEachCellTwice) {
  Bf16Tensor x({1, 1 * 2 * 2, 3});  // F=1, H=2, W=2, C=3
  for (std::int64_t i = 0; i < x.numel(); ++i) x.data[i] = bf16_rne(float(i));
  const Bf16Tensor up = pipeline::upsample_nearest2x(x, 1, 2, 2);
  ASSERT_EQ(up.shape, (Shape{1, 16, 3}));
  for (std::int64_t r = 0; r < 4; ++r)
    for (std::int64_t q = 0; q < 4; ++q)
      for (std::int64_t ch = 0; ch < 3; ++ch)
        EXPECT_EQ(up.data[(r * 4 + q) * 3 + ch], x.data[((r / 2) * 2 + q / 2) * 3 + ch]);
  EXPECT_THROW(pipeline::upsample_nearest2x(x, 1, 3, 2), Error);
}

TEST(Sampler, NoiserAndTerminalSteps) {
  Bf16Tensor clean({1, 2, 2}), noise({1, 2, 2});
  for (int i = 0; i < 4; ++i) clean.data[i] = bf16_rne(0.25f * float(i)), noise.data[i] = bf16_rne(-0.5f + 0.3f * float(i));
  // scale 1 gives exactly the noise (PyTorch's lerp takes b - (b - a)(1 - w) for w >= 0.5).
  EXPECT_EQ(sha256_hex(pipeline::noise_latent(clean, noise, 1.0f)), sha256_hex(noise));
  const Bf16Tensor x0 = clean;
  EXPECT_EQ(sha256_hex(pipeline::ancestral_step(noise, x0, 0.421875f, 0.0f, {})), sha256_hex(x0));
  // Deterministic Euler at sigma' = 0 still goes through the velocity (not exactly x0 in general),
  // but with x0 = x it returns x.
  EXPECT_EQ(sha256_hex(pipeline::euler_step(noise, noise, 0.421875f, 0.0f)), sha256_hex(noise));
}

// The replay starts from exactly the recorded state (SynthInit noise under the recording's names)
// and the first invocation of the dense path lands closer to the official MATH result than the
// official FLASH block does to MATH (block_small: video_out 1.96e-3, audio_out 2.31e-3, read
// from the recording).
TEST(Trajectory, DenseReplayStartsBitwiseAndFirstStepIsCloserThanFlash) {
  const auto result = run_tiny("dense");
  ASSERT_EQ(result.states.size(), 13u);
  ASSERT_EQ(result.invocations.size(), 11u);
  const auto& rec = recorded().states;
  EXPECT_EQ(sha256_hex(result.states[0].video), sha256_hex(rec[0].video));
  EXPECT_EQ(sha256_hex(result.states[0].audio), sha256_hex(rec[0].audio));
  for (std::size_t i = 0; i < 13; ++i) {
    EXPECT_EQ(result.states[i].name, rec[i].name);
    EXPECT_EQ(result.states[i].sigma_from, rec[i].sigma_from) << rec[i].name;
    EXPECT_EQ(result.states[i].sigma_to, rec[i].sigma_to) << rec[i].name;
  }
  auto f = hdf5::File::open_read(ref("block_small.h5"));
  auto flash_vs_math = [&](const char* t) {
    const Bf16Tensor a = f.read_bf16(std::string("/block_small/flash/") + t);
    const Bf16Tensor b = f.read_bf16(std::string("/block_small/math/") + t);
    return psi::distance(a.span(), b.span()).rel_l2;
  };
  const auto dv = psi::distance(result.states[1].video.span(), rec[1].video.span());
  const auto da = psi::distance(result.states[1].audio.span(), rec[1].audio.span());
  EXPECT_GT(dv.differing, 0);  // CPU and GPU accumulation orders differ: not bitwise
  EXPECT_LT(dv.rel_l2, flash_vs_math("video_out"));
  EXPECT_LT(da.rel_l2, flash_vs_math("audio_out"));
}

// Teacher forcing replaces each step's start with the recorded state: its first step equals the
// free-running first step bit for bit (both start from the recorded initial state), and every
// forced step starts from the recording.
TEST(Trajectory, TeacherForcingUsesRecordedStates) {
  std::vector<int> asked;
  pipeline::TrajectoryHooks hooks;
  hooks.teacher = [&](int k) {
    asked.push_back(k);
    return &recorded().states.at(std::size_t(k - 1));
  };
  const auto forced = run_tiny("baseline", hooks);
  const auto free = run_tiny("baseline");
  EXPECT_EQ(asked, (std::vector<int>{1, 2, 3, 4, 5, 6, 7, 8, 10, 11, 12}));
  EXPECT_EQ(sha256_hex(forced.states[1].video), sha256_hex(free.states[1].video));
  EXPECT_NE(sha256_hex(forced.states[12].video), sha256_hex(free.states[12].video));
}

// The SHA-256 of every saved state of the tiny one-token run, per path, pinned as a regression
// fixture: CPU arithmetic must be deterministic across machines and thread counts. Changing
// tests/data/one_token_sha256.json is a deliberate, explained commit (regenerate it with
// PSI_UPDATE_FIXTURES=1).
TEST(Trajectory, OneTokenStateHashesArePinned) {
  const fs::path fixture = fs::path(PSI_TEST_DATA) / "one_token_sha256.json";
  nlohmann::json got;
  for (const std::string& v : model::numerics_variant_names())
    for (const auto& s : run_tiny(v).states) {
      got[v][s.name]["video"] = sha256_hex(s.video);
      got[v][s.name]["audio"] = sha256_hex(s.audio);
    }
  if (const char* u = std::getenv("PSI_UPDATE_FIXTURES"); u && std::string(u) == "1") {
    std::ofstream(fixture) << got.dump(1) << "\n";
    GTEST_FAIL() << "fixture rewritten: " << fixture << " (commit it with an explanation)";
  }
  std::ifstream in(fixture);
  ASSERT_TRUE(in) << fixture;
  const nlohmann::json want = nlohmann::json::parse(in);
  EXPECT_EQ(got, want);
}

#include "engine/pipeline/context_mask.h"

TEST(ContextMask, OnlyFiniteExactZerosAreElided) {
  F32Tensor m({1, 1, 1024});
  EXPECT_TRUE(pipeline::check_zero_mask(m).elidable);
  m.data[7] = -0.0f;
  EXPECT_TRUE(pipeline::check_zero_mask(m).elidable);
  m.data[700] = -1e-30f;
  auto c = pipeline::check_zero_mask(m);
  EXPECT_FALSE(c.elidable);
  EXPECT_NE(c.reason.find("element 700"), std::string::npos) << c.reason;
  m.data[700] = 0.0f;
  m.data[3] = -std::numeric_limits<float>::infinity();
  c = pipeline::check_zero_mask(m);
  EXPECT_FALSE(c.elidable);
  EXPECT_NE(c.reason.find("element 3 is infinite"), std::string::npos) << c.reason;
  m.data[3] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_FALSE(pipeline::check_zero_mask(m).elidable);
}
