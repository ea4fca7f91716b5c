// one-token (Table III): the one-token 8+3 replay through every numerics variant's path (dense,
// official-h200, baseline, modified);
// per path the invocation wall, and the relative L2 of every saved state to the recorded
// official trajectory (free-running and teacher-forced from each recorded state) where the
// config and seed match a recording, else to the dense path.
#include "experiments/drivers.h"

#include <cmath>
#include <filesystem>
#include <limits>
#include <map>

#include "engine/model/variant.h"
#include "experiments/trajectory_support.h"

namespace psi::exp {

namespace {

// The replay's two text contexts, each with the recording it is compared with: the one-token
// context of the paper's Table III, and 1,024-row contexts, where the text cross-attention's
// key tiling really works.
struct ContextCase {
  const char* label;
  const char* file;
  const char* group;  // also the SynthInit name prefix of the run's inputs
  std::int64_t rows;
};
constexpr ContextCase kContexts[] = {{"one-token", "probe_attn_traj.h5", "trajectory_tiny", 1},
                                     {"ctx1024", "trajectory_ctx1024.h5", "trajectory_tiny_ctx1024", 1024}};

std::optional<RecordedTrajectory> matching_recording(const Options& o, const model::ModelConfig& c,
                                                     const ContextCase& cc) {
  const auto file = reference_dir(o) / cc.file;
  if (c.name != "tiny" || o.profile != "ltx25" || !o.checkpoint.empty() || !std::filesystem::exists(file))
    return std::nullopt;
  RecordedTrajectory r = read_recorded_trajectory(file, cc.group);
  if (o.seed_given && o.seed != r.seed) return std::nullopt;
  return r;
}

}  // namespace

void run_one_token(const Options& o, Report& report) {
  const model::ModelConfig c = model::model_config(o.model, o.profile);
  std::int64_t index = 0;
  for (const ContextCase& cc : kContexts) {
    if (o.quick && cc.rows != 1) continue;  // --quick: the one-token context only
    const auto recording = matching_recording(o, c, cc);
    const std::uint64_t seed = recording ? recording->seed : o.seed;
    auto weights = make_weights(o, seed);
    pipeline::TrajectoryCase tc{cc.group, cc.group, cc.rows, seed, seed};
    std::vector<pipeline::SavedState> dense_states;
    for (const std::string& path : model::numerics_variant_names()) {
      for (bool forced : {false, true}) {
        const std::int64_t i = index++;
        if (forced && !recording) continue;  // teacher forcing needs recorded states
        pipeline::TrajectoryHooks hooks;
        if (forced) hooks.teacher = [&](int k) { return &recording->states.at(std::size_t(k - 1)); };
        const std::string mode = forced ? "teacher-forced" : "free-running";
        PathRun pr = run_path(o, c, *weights, tc, path, std::string("one-token ") + cc.label + " " + path + " " + mode, hooks);
        const auto& result = pr.result;
        if (path == "dense" && !forced) dense_states = result.states;
        const auto& ref = recording ? recording->states : dense_states;
        auto [mean, sd] = wall_mean_sd(result.invocations);
        nlohmann::json rec{{"context", cc.label},
                           {"context_rows", cc.rows},
                           {"path", path},
                           {"mode", mode},
                           {"reference", recording ? "official " + recording->group + " (" +
                                                         recording->file.filename().string() + ")"
                                                   : "dense path"},
                           {"seed", seed},
                           {"wall_mean_s", mean},
                           {"wall_sd_s", sd},
                           {"invocations", result.invocations.size()},
                           {"states", compare_states(result.states, ref)},
                           {"per_invocation", pr.invocations},
                           {"run", pr.run}};
        save_states(report, std::string("/states/") + cc.label + "/" + path + "/" + (forced ? "teacher_forced" : "free_running"),
                    result.states, path);
        report.add_case(i, std::move(rec));
      }
    }
  }
}

namespace {
// The PSI paths' managed arena numbers; dense runs on whole host tensors.
std::string peak_cell(const nlohmann::json& run) {
  if (run.is_null()) return "no arena (whole tensors)";
  return fmt_mib(run["managed_peak_bytes"]) + " / " + fmt_mib(run["bound_bytes"]);
}
}  // namespace

std::vector<Table> tabulate_one_token(const nlohmann::json& cases, const nlohmann::json& options) {
  Table t;
  t.title = "one-token 8+3 replay (Table III) — model " + options.value("model", std::string("?"));
  t.columns = {"context", "path", "mode", "invocation wall (s, mean ± SD)", "managed peak / bound",
               "final video rel L2", "final audio rel L2", "max video rel L2 over states", "all finite"};
  std::vector<Table> per_state;
  std::map<std::string, std::string> reference;
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
    t.add_row({c["context"], c["path"], c["mode"],
               fmt_fixed(c["wall_mean_s"], 3) + " ± " + fmt_fixed(c["wall_sd_s"], 3), peak_cell(c["run"]),
               fmt_sci(last["video_rel_l2"]), fmt_sci(last["audio_rel_l2"]), fmt_sci(worst), finite ? "yes" : "NO"});
    reference[c["context"]] = c["reference"];
  }
  for (const auto& [context, ref] : reference) {
    Table s;
    s.title = "per-state relative L2 to " + ref + ", " + context + " context (video / audio)";
    s.columns = {"state"};
    std::vector<const nlohmann::json*> in;
    for (auto& c : cases)
      if (c["context"] == context) {
        in.push_back(&c);
        s.columns.push_back(c["path"].get<std::string>() + " " + c["mode"].get<std::string>());
      }
    for (std::size_t k = 0; k < (*in.front())["states"].size(); ++k) {
      std::vector<std::string> row{(*in.front())["states"][k]["state"]};
      for (const nlohmann::json* c : in)
        row.push_back(fmt_sci((*c)["states"][k]["video_rel_l2"]) + " / " + fmt_sci((*c)["states"][k]["audio_rel_l2"]));
      s.add_row(row);
    }
    per_state.push_back(std::move(s));
    t.notes.push_back(context + " reference: " + ref);
  }
  t.notes.push_back("teacher-forced: each step starts from the recorded state. baseline and modified run their blocks "
                    "through the PSI executor (default arena, reuse+prefetch); per-invocation arena numbers are in the "
                    "report's cases.");
  std::vector<Table> out{t};
  out.insert(out.end(), per_state.begin(), per_state.end());
  return out;
}

}  // namespace psi::exp
