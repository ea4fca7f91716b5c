// one-token (Table III): the one-token 8+3 replay through every numerics variant's path (dense,
// official-h200, baseline, modified);
// per path the invocation wall, and the relative L2 of every saved state to the recorded
// official trajectory (free-running and teacher-forced from each recorded state) where the
// config and seed match a recording, else to the dense path. Beside it, every path's distance
// (and the recorded official states') to the float64 reference trajectory of the same inputs:
// free-running paths and the recording against the free-running float64 run, teacher-forced
// paths against the float64 run forced from the same recorded states.
#include "experiments/drivers.h"

#include <cmath>
#include <filesystem>
#include <limits>
#include <map>

#include "engine/model/block_f64.h"
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
  if (c.name != "tiny" || o.profile != "ltx25" || !o.checkpoint.empty()) return std::nullopt;
  // The recorded trajectory is what this config is compared with: a folder without it must not
  // turn the run into one without the official column.
  if (!std::filesystem::exists(file))
    throw Error(file.string() + ": no such recording; one-token compares the tiny ltx25 run with it (give "
                "--reference a folder that holds " + cc.file + ", or run another --model)");
  RecordedTrajectory r = read_recorded_trajectory(file, cc.group);
  if (o.seed_given && o.seed != r.seed) return std::nullopt;
  return r;
}

// A float64 run's states correctly rounded to BF16: the closest any BF16 state can be to it.
std::vector<pipeline::SavedState> rounded(const std::vector<pipeline::SavedStateF64>& states) {
  std::vector<pipeline::SavedState> out;
  for (const auto& s : states)
    out.push_back({s.name, s.sigma_from, s.sigma_to, model::round_to_bf16(s.video), model::round_to_bf16(s.audio)});
  return out;
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
    auto teacher = [&](int k) { return &recording->states.at(std::size_t(k - 1)); };
    const std::string f64_label = std::string("one-token ") + cc.label + " float64 ";
    const pipeline::TrajectoryResultF64 f64_free = run_f64_with_progress(c, *weights, tc, f64_label + "free-running");
    save_states(report, std::string("/states/") + cc.label + "/float64/free_running", f64_free.states, "float64");
    const auto [f64_mean, f64_sd] = wall_mean_sd(f64_free.invocations);
    report.add_case(index++, {{"context", cc.label},
                              {"context_rows", cc.rows},
                              {"path", "float64 rounded to BF16"},
                              {"mode", "free-running"},
                              {"seed", seed},
                              {"float64_wall_mean_s", f64_mean},
                              {"float64_wall_sd_s", f64_sd},
                              {"states_f64", compare_states(rounded(f64_free.states), f64_free.states)}});
    pipeline::TrajectoryResultF64 f64_forced;
    if (recording) {
      pipeline::TrajectoryHooks hooks;
      hooks.teacher = teacher;
      f64_forced = run_f64_with_progress(c, *weights, tc, f64_label + "teacher-forced", hooks);
      save_states(report, std::string("/states/") + cc.label + "/float64/teacher_forced", f64_forced.states, "float64");
      report.add_case(index++, {{"context", cc.label},
                                {"context_rows", cc.rows},
                                {"path", "official MATH (recorded)"},
                                {"mode", "free-running"},
                                {"recorded", true},
                                {"seed", seed},
                                {"states_f64", compare_states(recording->states, f64_free.states)}});
    }
    std::vector<pipeline::SavedState> dense_states;
    for (const std::string& path : model::numerics_variant_names()) {
      for (bool forced : {false, true}) {
        const std::int64_t i = index++;
        if (forced && !recording) continue;  // teacher forcing needs recorded states
        pipeline::TrajectoryHooks hooks;
        if (forced) hooks.teacher = teacher;
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
                           {"states_f64", compare_states(result.states, forced ? f64_forced.states : f64_free.states)},
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

// The largest video relative L2 over a case's state rows (NaN if any is NaN).
double worst_video(const nlohmann::json& states) {
  double worst = 0;
  for (auto& r : states) {
    const double v = r["video_rel_l2"].get<double>();
    worst = std::isnan(v) || std::isnan(worst) ? std::numeric_limits<double>::quiet_NaN() : std::max(worst, v);
  }
  return worst;
}

std::string video_audio(const nlohmann::json& row) {
  return fmt_sci(row["video_rel_l2"]) + " / " + fmt_sci(row["audio_rel_l2"]);
}

std::string differing(const nlohmann::json& row, const char* stream) {
  const std::string s = stream;
  return fmt_count(row[s + "_differing"].get<long long>()) + " / " + fmt_count(row[s + "_total"].get<long long>());
}

// A run of a path (not the recording or the rounded float64 states, which have no wall).
bool is_run(const nlohmann::json& c) { return c.contains("states"); }

// Per state, one column per case: video / audio relative L2 of `key`'s rows.
Table per_state(const std::string& title, const std::vector<const nlohmann::json*>& in, const char* key) {
  Table s;
  s.title = title;
  s.columns = {"state"};
  for (const nlohmann::json* c : in)
    s.columns.push_back((*c)["path"].get<std::string>() + " " + (*c)["mode"].get<std::string>());
  for (std::size_t k = 0; k < (*in.front())[key].size(); ++k) {
    std::vector<std::string> row{(*in.front())[key][k]["state"]};
    for (const nlohmann::json* c : in) row.push_back(video_audio((*c)[key][k]));
    s.add_row(row);
  }
  return s;
}
}  // namespace

std::vector<Table> tabulate_one_token(const nlohmann::json& cases, const nlohmann::json& options) {
  Table t;
  t.title = "one-token 8+3 replay (Table III) — model " + options.value("model", std::string("?"));
  t.columns = {"context", "path", "mode", "invocation wall (s, mean ± SD)", "managed peak / bound",
               "final video rel L2", "final audio rel L2", "max video rel L2 over states", "all finite",
               "final rel L2 to float64 (video / audio)"};
  std::vector<Table> more;
  std::map<std::string, std::string> reference;
  for (auto& c : cases) {
    if (!is_run(c)) continue;
    const auto& st = c["states"];
    bool finite = true;
    for (auto& r : st) finite = finite && r["finite"].get<bool>();
    const auto& last = st.back();
    t.add_row({c["context"], c["path"], c["mode"],
               fmt_fixed(c["wall_mean_s"], 3) + " ± " + fmt_fixed(c["wall_sd_s"], 3), peak_cell(c["run"]),
               fmt_sci(last["video_rel_l2"]), fmt_sci(last["audio_rel_l2"]), fmt_sci(worst_video(st)),
               finite ? "yes" : "NO", c.contains("states_f64") ? video_audio(c["states_f64"].back()) : "—"});
    reference[c["context"]] = c["reference"];
  }
  for (const auto& [context, ref] : reference) {
    std::vector<const nlohmann::json*> paths, with_f64;
    for (auto& c : cases) {
      if (c["context"] != context) continue;
      if (is_run(c)) paths.push_back(&c);
      if (c.contains("states_f64")) with_f64.push_back(&c);
    }
    more.push_back(per_state("per-state relative L2 to " + ref + ", " + context + " context (video / audio)", paths,
                             "states"));
    t.notes.push_back(context + " reference: " + ref);
    if (with_f64.empty()) continue;
    Table f;
    f.title = "distance to the float64 trajectory, " + context + " context (final state; differing: elements " +
              "other than the float64 state rounded to BF16)";
    f.columns = {"path", "mode", "final video rel L2", "final audio rel L2", "final video differing",
                 "final audio differing", "max video rel L2 over states"};
    f.notes.push_back("float64 trajectory: the same run with every product in float64 and everything else in double, "
                      "no BF16 write (engine/pipeline/trajectory.h); free-running paths and the recorded official "
                      "states against its free-running run, teacher-forced paths against its run forced from the same "
                      "recorded states. float64 rounded to BF16: its own states correctly rounded, the floor no "
                      "BF16 state can go below.");
    for (const nlohmann::json* c : with_f64) {
      if (c->contains("float64_wall_mean_s"))
        f.notes.push_back("float64 run: invocation wall " + fmt_fixed((*c)["float64_wall_mean_s"], 3) + " ± " +
                          fmt_fixed((*c)["float64_wall_sd_s"], 3) + " s (free-running).");
      const auto& last = (*c)["states_f64"].back();
      f.add_row({(*c)["path"], (*c)["mode"], fmt_sci(last["video_rel_l2"]), fmt_sci(last["audio_rel_l2"]),
                 differing(last, "video"), differing(last, "audio"), fmt_sci(worst_video((*c)["states_f64"]))});
    }
    more.push_back(std::move(f));
    more.push_back(per_state("per-state relative L2 to the float64 trajectory, " + context + " context (video / audio)",
                             with_f64, "states_f64"));
  }
  t.notes.push_back("teacher-forced: each step starts from the recorded state. baseline and modified run their blocks "
                    "through the PSI executor (default arena, reuse+prefetch); per-invocation arena numbers are in the "
                    "report's cases.");
  std::vector<Table> out{t};
  out.insert(out.end(), more.begin(), more.end());
  return out;
}

}  // namespace psi::exp
