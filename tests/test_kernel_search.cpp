// The kernel search on the recorded tiny trajectories (experiments/kernel_search.h) and
// `psi kernels`: one step run alone is bitwise the same step of the whole teacher-forced run,
// the search's result is what re-running it gives, and the commands refuse what they must.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <unistd.h>

#include "engine/error.h"
#include "engine/model/variant.h"
#include "engine/model/weights.h"
#include "engine/official/kernel_config.h"
#include "engine/pipeline/trajectory.h"
#include "engine/sha256.h"
#include "experiments/kernel_config_file.h"
#include "experiments/kernel_search.h"
#include "experiments/trajectory_support.h"
#include "probes/probe_cases.h"
#include "psi_command.h"
#include "tests/recordings.h"

namespace {

namespace fs = std::filesystem;

fs::path reference() { return psi::test::reference_dir(); }

std::string file_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

bool same_bits(const psi::Bf16Tensor& a, const psi::Bf16Tensor& b) {
  if (a.shape != b.shape) return false;
  for (std::size_t i = 0; i < a.data.size(); ++i)
    if (a.data[i].bits != b.data[i].bits) return false;
  return true;
}

// Every step alone (TrajectoryHooks::only_step) equals that step of one whole teacher-forced
// run, for both recorded contexts.
TEST(KernelSearch, OneStepAloneIsThatStepOfTheWholeTeacherForcedRun) {
  for (const std::int64_t rows : {1, 1024}) {
    const psi::exp::TinyTrajectory t(reference(), rows);
    const std::string group = rows == 1 ? "trajectory_tiny" : "trajectory_tiny_ctx1024";
    const auto rec =
        psi::exp::read_recorded_trajectory(reference() / (rows == 1 ? "probe_attn_traj.h5" : "trajectory_ctx1024.h5"), group);
    psi::model::SynthInitSource w(rec.seed);
    psi::pipeline::TrajectoryHooks h;
    h.teacher = [&](int k) { return &rec.states.at(std::size_t(k - 1)); };
    const auto whole = psi::pipeline::run_trajectory(psi::model::model_config("tiny", "ltx25"), w,
                                                     {group, group, rows, rec.seed, rec.seed},
                                                     psi::model::numerics_variant("official-h200"), h);
    ASSERT_EQ(whole.states.size(), 13u);
    for (int step : psi::exp::TinyTrajectory::steps()) {
      const auto [alone, recorded] = t.forced_state(step, {});
      EXPECT_EQ(alone.name, whole.states[std::size_t(step)].name);
      EXPECT_TRUE(same_bits(alone.video, whole.states[std::size_t(step)].video)) << rows << " step " << step;
      EXPECT_TRUE(same_bits(alone.audio, whole.states[std::size_t(step)].audio)) << rows << " step " << step;
      EXPECT_EQ(recorded.name, rec.states[std::size_t(step)].name);
    }
  }
}

TEST(KernelSearch, OneStepAloneNeedsAModelStepAndATeacher) {
  const psi::exp::TinyTrajectory t(reference(), 1);
  for (int bad : {0, 9, 13}) EXPECT_THROW(t.forced_state(bad, {}), psi::Error) << bad;
  psi::model::SynthInitSource w(0);
  psi::pipeline::TrajectoryHooks h;
  h.only_step = 3;
  EXPECT_THROW(psi::pipeline::run_trajectory(psi::model::model_config("tiny", "ltx25"), w,
                                             {"trajectory_tiny", "trajectory_tiny", 1, 0, 0},
                                             psi::model::numerics_variant("official-h200"), h),
               psi::Error);
}

// A short search: every trial's objective is what that configuration gives when run again, the
// best is no worse than the start and is what the trials kept.
TEST(KernelSearch, TheBestConfigurationIsWhatRunningItGives) {
  const psi::exp::TinyTrajectory t(reference(), 1);
  psi::exp::KernelSearchOptions o;
  o.step = 1;
  o.max_sweeps = 1;
  o.splits = {1, 2};
  o.granules = {64};
  o.fma_chains = false;
  std::size_t seen = 0;
  const auto r = psi::exp::search_kernels(t, psi::official::KernelConfig{}, o,
                                          [&](const psi::exp::KernelTrial&, std::size_t done, std::size_t) { seen = done; });
  EXPECT_EQ(r.start_objective, t.forced_step(1, {}).sum());
  EXPECT_LE(r.best_objective, r.start_objective);
  EXPECT_EQ(r.sweeps, 1);
  ASSERT_FALSE(r.trials.empty());
  EXPECT_EQ(seen, r.trials.size());
  // The shapes a split by 2 (64 wide) changes: K above 64.
  std::size_t splittable = 0;
  for (const auto& u : r.shapes) splittable += u.key.shape.depth > 64;
  EXPECT_EQ(r.trials.size(), splittable);
  std::int64_t kept_best = r.start_objective;
  for (const auto& tr : r.trials)
    if (tr.kept) kept_best = tr.objective;
  EXPECT_EQ(kept_best, r.best_objective);
  EXPECT_EQ(t.forced_step(1, r.best).sum(), r.best_objective);
}

// The searches whose numbers docs/official-kernels.md reports (docs/runs/kernel-search-step*.json,
// written by `psi kernels search --step K --out`): the start and the best configuration give the
// objectives recorded, and every state of both trajectories the recorded confirmation.
TEST(KernelSearch, StoredSearchesHoldTheirNumbers) {
  const fs::path runs = fs::path(PSI_TEST_DATA) / ".." / ".." / "docs" / "runs";
  int files = 0;
  const psi::exp::TinyTrajectory one(reference(), 1), wide(reference(), 1024);
  for (const auto& e : fs::directory_iterator(runs)) {
    if (!e.path().filename().string().starts_with("kernel-search-step")) continue;
    ++files;
    const std::string name = e.path().filename().string();
    const nlohmann::json j = nlohmann::json::parse(file_text(e.path()));
    const nlohmann::json& rec = j.at("search");
    const int step = rec.at("objective_step").get<int>();
    nlohmann::json start_file = {{"schema", "psi-kernel-config/1"}, {"products", rec.at("start")}};
    const fs::path start_path = fs::temp_directory_path() / ("psi_start_" + std::to_string(::getpid()) + ".json");
    std::ofstream(start_path) << start_file.dump();
    const psi::official::KernelConfig start = psi::exp::read_kernel_config(start_path), best = psi::exp::read_kernel_config(e.path());
    fs::remove(start_path);
    EXPECT_EQ(one.forced_step(step, start).sum(), rec.at("start_objective").get<std::int64_t>()) << name;
    EXPECT_EQ(one.forced_step(step, best).sum(), rec.at("best_objective").get<std::int64_t>()) << name;
    for (const psi::exp::TinyTrajectory* t : {&one, &wide}) {
      const auto base = psi::exp::confirm(*t, {}), found = psi::exp::confirm(*t, best);
      int rows = 0;
      for (const auto& row : rec.at("confirmation")) {
        if (row.at("context") != t->label()) continue;
        const std::size_t i = std::size_t(rows++);
        const auto pair = [](const psi::exp::StepDifference& d) { return nlohmann::json::array({d.video, d.audio}); };
        ASSERT_LT(i, base.states.size()) << name;
        EXPECT_EQ(row.at("state"), base.states[i]) << name;
        EXPECT_EQ(row.at("recorded_free"), pair(base.free[i])) << name << " " << base.states[i];
        EXPECT_EQ(row.at("found_free"), pair(found.free[i])) << name << " " << base.states[i];
        if (base.forced[i]) {
          EXPECT_EQ(row.at("recorded_forced"), pair(*base.forced[i])) << name << " " << base.states[i];
          EXPECT_EQ(row.at("found_forced"), pair(*found.forced[i])) << name << " " << base.states[i];
        }
      }
      EXPECT_EQ(rows, 13) << name << " " << t->label();
    }
  }
  EXPECT_EQ(files, 2);
}

// The per-token AdaLN products are listed at the rows the official model runs (one per token).
TEST(KernelsCommand, ShapesListThePerTokenAdaLnAtTheOfficialRows) {
  const auto r = psi::testing::run_psi_in("kernels shapes", fs::temp_directory_path());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("tensor-core 72x2304x256"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("adaln_single.linear"), std::string::npos);
  EXPECT_NE(r.out.find("f32-values  72x128x72"), std::string::npos);
  EXPECT_NE(r.out.find("video.attn1.sdpa"), std::string::npos);
}

TEST(KernelsCommand, BadInputIsRefused) {
  const fs::path dir = fs::temp_directory_path() / ("psi_kernels_cli_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path recording = reference() / "probe_attn_traj.h5";
  const std::string text = file_text(recording);
  const std::string before = psi::sha256_hex(text.data(), text.size());
  auto r = psi::testing::run_psi_in("kernels search --out " + recording.string(), dir);
  EXPECT_EQ(r.status, 2) << r.err;
  const std::string after = file_text(recording);
  EXPECT_EQ(psi::sha256_hex(after.data(), after.size()), before);
  r = psi::testing::run_psi_in("kernels where --step 9", dir);
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--step 9"), std::string::npos) << r.err;
  r = psi::testing::run_psi_in("kernels confirm", dir);
  EXPECT_EQ(r.status, 2);
  r = psi::testing::run_psi_in("run one-token --quick --out " + (dir / "x.h5").string() + " --kernel-config " +
                                   (dir / "missing.json").string(),
                               dir);
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("missing.json"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir / "x.h5"));
  std::ofstream(dir / "bad.json") << "{\"schema\": \"psi-kernel-config/1\", \"products\": [{\"chain\": \"x\"}]}";
  r = psi::testing::run_psi_in("kernels shapes --config " + (dir / "bad.json").string(), dir);
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("products[0]"), std::string::npos) << r.err;
  fs::remove_all(dir);
}

}  // namespace
