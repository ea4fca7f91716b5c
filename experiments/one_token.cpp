// one-token (Table III): the one-token 8+3 replay through the dense, baseline and modified paths;
// per path the invocation wall, and the relative L2 of every saved state to the recorded
// official trajectory (free-running and teacher-forced from each recorded state) where the
// config and seed match a recording, else to the dense path.
#include "experiments/drivers.h"

#include <cmath>
#include <filesystem>
#include <limits>

#include "engine/model/variant.h"
#include "experiments/trajectory_support.h"

namespace psi::exp {

namespace {

const char* kRecordingFile = "probe_attn_traj.h5";
const char* kRecordingGroup = "trajectory_tiny";

std::optional<RecordedTrajectory> matching_recording(const Options& o, const model::ModelConfig& c) {
  const auto file = reference_dir(o) / kRecordingFile;
  if (c.name != "tiny" || o.profile != "ltx25" || !o.checkpoint.empty() || !std::filesystem::exists(file))
    return std::nullopt;
  RecordedTrajectory r = read_recorded_trajectory(file, kRecordingGroup);
  if (o.seed_given && o.seed != r.seed) return std::nullopt;
  return r;
}

}  // namespace

void run_one_token(const Options& o, Report& report) {
  const model::ModelConfig c = model::model_config(o.model, o.profile);
  const auto recording = matching_recording(o, c);
  const std::uint64_t seed = recording ? recording->seed : o.seed;
  auto weights = make_weights(o, seed);
  pipeline::TrajectoryCase tc{kRecordingGroup, kRecordingGroup, 1, seed, seed};

  std::vector<pipeline::SavedState> dense_states;
  std::int64_t index = 0;
  for (const std::string& path : model::numerics_variant_names()) {
    const model::NumericsVariant& v = model::numerics_variant(path);
    for (bool forced : {false, true}) {
      const std::int64_t i = index++;
      if (forced && !recording) continue;  // teacher forcing needs recorded states
      if (!o.in_shard(i)) continue;
      pipeline::TrajectoryHooks hooks;
      if (forced)
        hooks.teacher = [&](int k) { return &recording->states.at(std::size_t(k - 1)); };
      auto result = run_with_progress(c, *weights, tc, v,
                                      "one-token " + path + (forced ? " teacher-forced" : " free-running"), hooks);
      if (path == "dense" && !forced) dense_states = result.states;
      const auto& ref = recording ? recording->states : dense_states;
      auto [mean, sd] = wall_mean_sd(result.invocations);
      nlohmann::json rec{{"path", path},
                         {"mode", forced ? "teacher-forced" : "free-running"},
                         {"reference", recording ? "official " + recording->group + " (" +
                                                       recording->file.filename().string() + ")"
                                                 : "dense path"},
                         {"seed", seed},
                         {"wall_mean_s", mean},
                         {"wall_sd_s", sd},
                         {"invocations", result.invocations.size()},
                         {"states", compare_states(result.states, ref)}};
      save_states(report, "/states/" + path + "/" + (forced ? "teacher_forced" : "free_running"), result.states, path);
      report.add_case(i, std::move(rec));
    }
  }
}

std::vector<Table> tabulate_one_token(const nlohmann::json& cases, const nlohmann::json& options) {
  Table t;
  t.title = "one-token 8+3 replay (Table III) — model " + options.value("model", std::string("?"));
  t.columns = {"path", "mode", "invocation wall (s, mean ± SD)", "final video rel L2", "final audio rel L2",
               "max video rel L2 over states", "all finite"};
  Table s;
  s.title = "per-state relative L2 to the reference (video / audio)";
  s.columns = {"state"};
  for (auto& c : cases) s.columns.push_back(c["path"].get<std::string>() + " " + c["mode"].get<std::string>());
  std::string reference;
  for (auto& c : cases) {
    const auto& st = c["states"];
    double worst = 0;
    bool finite = true;
    for (auto& r : st) {
      const double v = r["video_rel_l2"].get<double>();
      worst = std::isnan(v) || std::isnan(worst) ? std::numeric_limits<double>::quiet_NaN() : std::max(worst, v);
      finite = finite && r["finite"].get<bool>();
    }
    const auto& last = st.back();
    t.add_row({c["path"], c["mode"],
               fmt_fixed(c["wall_mean_s"], 3) + " ± " + fmt_fixed(c["wall_sd_s"], 3),
               fmt_sci(last["video_rel_l2"]), fmt_sci(last["audio_rel_l2"]), fmt_sci(worst), finite ? "yes" : "NO"});
    reference = c["reference"];
  }
  if (!cases.empty()) {
    for (std::size_t k = 0; k < cases[0]["states"].size(); ++k) {
      std::vector<std::string> row{cases[0]["states"][k]["state"]};
      for (auto& c : cases)
        row.push_back(fmt_sci(c["states"][k]["video_rel_l2"]) + " / " + fmt_sci(c["states"][k]["audio_rel_l2"]));
      s.add_row(row);
    }
  }
  t.notes.push_back("reference: " + reference + "; teacher-forced: each step starts from the recorded state.");
  return {t, s};
}

}  // namespace psi::exp
