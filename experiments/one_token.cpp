// one-token (Table III): the one-token 8+3 replay through every numerics variant's path but the
// one that claims the FLASH recordings (replays()); per path the wall summed over its eleven invocations (the
// paper's), the process peak, and the relative L2 of every saved state to the recorded official
// trajectory (free-running and teacher-forced from each recorded state) where the
// config and seed match a recording, else to the dense path. Beside it, every path's distance
// (and the recorded official states') to the float64 reference trajectory of the same inputs:
// free-running paths and the recording against the free-running float64 run, teacher-forced
// paths against the float64 run forced from the same recorded states.
#include "experiments/experiment.h"
#include "experiments/records.h"
#include "experiments/report.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <set>

#include "engine/model/block_f64.h"
#include "engine/model/variant.h"
#include "engine/progress.h"
#include "experiments/kernel_search.h"
#include "experiments/paper_line.h"
#include "experiments/process_peak.h"
#include "experiments/trajectory_ops.h"
#include "experiments/trajectory_support.h"
#include "hdf5/schema.h"
#include "outputs/output_path.h"
#include "probes/probe_cases.h"
#include "probes/recording.h"

namespace psi::exp {

// The options of one-token alone.
struct OneTokenOptions {
  // --capture: also write teacher-forced step 1 of the one-token trajectory under official-h200
  // operator by operator (experiments/trajectory_ops.h), the layout psi probe trajectory-step reads.
  std::string capture;
  static auto fields() { return std::tuple{field_if_present("capture", &OneTokenOptions::capture)}; }
};

void set_capture(const std::string& value, Options& o) {
  if (value.empty()) throw Error("--capture: an empty path");
  set_own_options(o, OneTokenOptions{value});
}

// The capture of step 1 of the recorded one-token trajectory, after the run's own cases.
void write_step_capture(const Options& o, const std::filesystem::path& out) {
  const probes::TrajectoryRecording& recorded = probes::trajectory_recording(1);
  const TinyTrajectory t(reference_dir(o), 1);
  OpCapture capture;
  observed_step(t, 1, o.kernels ? *o.kernels : official::KernelConfig{}, capture);
  write_capture(out, recorded.group, 1, t.state_name(1), t.seed(), capture.ops());
}

// A path's run in a row of the replay.
struct OneTokenResult {
  std::string reference;
  double wall_mean_s = 0, wall_sd_s = 0;
  std::uint64_t invocations = 0;
  std::vector<StateDistance> states;
  nlohmann::json per_invocation, run;  // run: null for the dense path
  std::string reference_file;          // the recording's path; empty for the dense path and in earlier reports
  std::optional<ProcessPeak> process_peak;  // absent in reports before it
  static auto fields() {
    using R = OneTokenResult;
    return std::tuple{field("states", &R::states),  // first: a path's run, not the recording or the float64 states
                      field("reference", &R::reference),
                      field_when_set("reference_file", &R::reference_file).provenance(),
                      field("wall_mean_s", &R::wall_mean_s).measures_time(),
                      field("wall_sd_s", &R::wall_sd_s).measures_time(),
                      field_if_present("invocations", &R::invocations),
                      field_if_present("per_invocation", &R::per_invocation).holds_time("wall_s"),
                      field("run", &R::run),
                      fields_flat(&R::process_peak)};
  }
};

// One row of the replay, of three kinds: a path's run (`result`), the recorded official states
// (`recorded`), the float64 states rounded to BF16 (`float64_wall`).
struct OneTokenCase {
  std::string context;
  std::int64_t context_rows = 0;
  std::string path, mode;
  std::uint64_t seed = 0;
  bool recorded = false;
  struct Float64Wall {  // the float64 run's own invocation wall (s)
    double mean_s = 0, sd_s = 0;
    static auto fields() {
      return std::tuple{field("float64_wall_mean_s", &Float64Wall::mean_s).measures_time(),
                        field("float64_wall_sd_s", &Float64Wall::sd_s).measures_time()};
    }
  };
  std::optional<Float64Wall> float64_wall;
  std::optional<OneTokenResult> result;
  std::optional<std::vector<StateDistance>> states_f64;  // absent in reports before the float64 run
  static auto fields() {
    using R = OneTokenCase;
    return std::tuple{field("context", &R::context),
                      field_if_present("context_rows", &R::context_rows),
                      field("path", &R::path),
                      field("mode", &R::mode),
                      field_if_present("seed", &R::seed),
                      field_when_set("recorded", &R::recorded),
                      fields_flat(&R::float64_wall),
                      fields_flat(&R::result),
                      field_optional("states_f64", &R::states_f64)};
  }
};

namespace {

// The recorded trajectories are SDPA MATH runs: the variant that claims the FLASH path has
// nothing to claim here, and one-token replays every other.
bool replays(const model::NumericsVariant& v) { return v.claims != "flash"; }

// "dense, official-h200, …": the variants one-token replays, for psi list.
std::string replayed_list() {
  std::string list;
  for (const model::NumericsVariant& v : model::numerics_variants())
    if (replays(v)) list += (list.empty() ? "" : ", ") + v.name;
  return list;
}

// The replay's two text contexts, each with the recording it is compared with
// (probes::trajectory_recordings): the one-token context of the paper's Table III, and 1,024-row
// contexts, where the text cross-attention's key tiling really works.
using ContextCase = probes::TrajectoryRecording;

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

// A row of the replay's table in context `cc`; the caller adds what the row holds.
OneTokenCase replay_row(const ContextCase& cc, const std::string& path, const std::string& mode, std::uint64_t seed) {
  OneTokenCase r;
  r.context = cc.label;
  r.context_rows = cc.context_rows;
  r.path = path;
  r.mode = mode;
  r.seed = seed;
  return r;
}

}  // namespace

void run_one_token(const Options& o, Report& report) {
  const model::ModelConfig c = model::model_config(o.model, o.profile);
  const std::string capture = own_options<OneTokenOptions>(o).capture;
  if (!capture.empty()) {
    // The capture is of the recorded trajectory's step: only a run that computes it can give it.
    if (o.model != "tiny" || o.profile != "ltx25" || !o.checkpoint.empty())
      throw Error("one-token: --capture writes the recorded tiny ltx25 trajectory's step; not with --model " + o.model +
                  " --profile " + o.profile + (o.checkpoint.empty() ? "" : " --checkpoint"));
    outputs::check_output(capture, run_inputs(o), "one-token: --capture", hdf5::is_psi_h5);
  }
  std::int64_t index = 0;
  for (const ContextCase& cc : probes::trajectory_recordings()) {
    if (o.quick && cc.context_rows != 1) continue;  // --quick: the one-token context only
    const auto recording = matching_recording(o, c, cc);
    const std::uint64_t seed = recording ? recording->seed : o.seed;
    auto weights = recording ? recorded_weights(*recording) : make_weights(o, seed);
    pipeline::TrajectoryCase tc{cc.group, cc.group, cc.context_rows, seed, seed};
    auto teacher = [&](int k) { return &recording->states.at(std::size_t(k - 1)); };
    const std::string f64_label = std::string("one-token ") + cc.label + " float64 ";
    // This context's trajectories: float64 and every path but FLASH's, free-running, and teacher
    // forced as well where there is a recording to force them with.
    long paths = 1;
    for (const model::NumericsVariant& v : model::numerics_variants()) paths += replays(v);
    Progress::expect_parts(recording ? 2 * paths : paths);
    const pipeline::TrajectoryResultF64 f64_free = run_f64_with_progress(c, *weights, tc, f64_label + "free-running");
    save_states(report, std::string("/states/") + cc.label + "/float64/free_running", f64_free.states, "float64");
    const auto [f64_mean, f64_sd] = wall_mean_sd(f64_free.invocations);
    OneTokenCase rounded_case = replay_row(cc, "float64 rounded to BF16", "free-running", seed);
    rounded_case.float64_wall = OneTokenCase::Float64Wall{f64_mean, f64_sd};
    rounded_case.states_f64 = compare_states(rounded(f64_free.states), f64_free.states);
    report.add_case(index++, rounded_case);
    pipeline::TrajectoryResultF64 f64_forced;
    if (recording) {
      pipeline::TrajectoryHooks hooks;
      hooks.teacher = teacher;
      f64_forced = run_f64_with_progress(c, *weights, tc, f64_label + "teacher-forced", hooks);
      save_states(report, std::string("/states/") + cc.label + "/float64/teacher_forced", f64_forced.states, "float64");
      OneTokenCase recorded = replay_row(cc, "official MATH (recorded)", "free-running", seed);
      recorded.recorded = true;
      recorded.states_f64 = compare_states(recording->states, f64_free.states);
      report.add_case(index++, recorded);
    }
    std::vector<pipeline::SavedState> dense_states;
    for (const std::string& path : model::numerics_variant_names()) {
      if (!replays(model::numerics_variant(path))) continue;
      for (bool forced : {false, true}) {
        const std::int64_t i = index++;
        if (forced && !recording) continue;  // teacher forcing needs recorded states
        pipeline::TrajectoryHooks hooks;
        if (forced) hooks.teacher = teacher;
        const std::string mode = forced ? "teacher-forced" : "free-running";
        PathRun pr = run_path(o, c, *weights, tc, path, std::string("one-token ") + cc.label + " " + path + " " + mode, hooks);
        const auto& result = pr.result;
        if (model::numerics_variant(path).role == model::VariantRole::psi_reference && !forced) dense_states = result.states;
        const auto& ref = recording ? recording->states : dense_states;
        auto [mean, sd] = wall_mean_sd(result.invocations);
        OneTokenCase rec = replay_row(cc, path, mode, seed);
        rec.result = OneTokenResult{recording ? "official " + recording->group + " (" +
                                                    recording->file.filename().string() + ")"
                                              : "dense path",
                                    mean, sd, result.invocations.size(), compare_states(result.states, ref),
                                    pr.invocations, pr.run, recording ? recording->file.string() : "",
                                    pr.process_peak};
        rec.states_f64 = compare_states(result.states, forced ? f64_forced.states : f64_free.states);
        save_states(report, std::string("/states/") + cc.label + "/" + path + "/" + (forced ? "teacher_forced" : "free_running"),
                    result.states, path);
        report.add_case(i, rec);
      }
    }
  }
  if (!capture.empty()) write_step_capture(o, capture);
}

namespace {
constexpr const char* kWallSum = "wall (s, sum of the invocations)";
constexpr const char* kWallPerInvocation = "invocation wall (s, mean ± SD per invocation)";

// The paper's wall: the sum of a path's invocation walls (per_invocation's wall_s), and how many.
std::pair<double, std::size_t> wall_sum(const OneTokenResult& p) {
  double sum = 0;
  std::size_t n = 0;
  if (p.per_invocation.is_array())
    for (const auto& i : p.per_invocation)
      if (i.contains("wall_s")) {
        sum += i["wall_s"].get<double>();
        ++n;
      }
  return {sum, n};
}

// The PSI paths' managed arena numbers; dense runs on whole host tensors.
std::string peak_cell(const nlohmann::json& run) {
  if (run.is_null()) return "no arena (whole tensors)";
  return fmt_mib(run["managed_peak_bytes"]) + " / " + fmt_mib(run["bound_bytes"]);
}

// The largest video relative L2 over a case's state rows (NaN if any is NaN).
double worst_video(const std::vector<StateDistance>& states) {
  double worst = 0;
  for (auto& r : states) {
    const double v = r.video_rel_l2;
    worst = std::isnan(v) || std::isnan(worst) ? std::numeric_limits<double>::quiet_NaN() : std::max(worst, v);
  }
  return worst;
}

std::string video_audio(const StateDistance& row) { return fmt_sci(row.video_rel_l2) + " / " + fmt_sci(row.audio_rel_l2); }

std::string differing(std::int64_t n, std::int64_t total) { return fmt_count(n) + " / " + fmt_count(total); }

// Per state, one column per case: video / audio relative L2 of `rows_of`'s rows.
template <class Rows>
Table per_state(const std::string& title, const std::vector<const OneTokenCase*>& in, Rows rows_of) {
  Table s;
  s.title = title;
  s.columns = {"state"};
  for (const OneTokenCase* c : in) s.columns.push_back(c->path + " " + c->mode);
  for (std::size_t k = 0; k < rows_of(*in.front()).size(); ++k) {
    std::vector<std::string> row{rows_of(*in.front())[k].state};
    for (const OneTokenCase* c : in) row.push_back(video_audio(rows_of(*c).at(k)));
    s.add_row(row);
  }
  return s;
}
}  // namespace

std::vector<Table> tabulate_one_token(const nlohmann::json& case_records, const nlohmann::json& options) {
  const auto cases = case_records.get<std::vector<OneTokenCase>>();
  std::vector<const ProcessPeak*> peaks;
  for (const OneTokenCase& c : cases)
    if (c.result) peaks.push_back(c.result->process_peak ? &*c.result->process_peak : nullptr);
  const ProcessPeakColumn peak = process_peak_column(peaks);
  Table t;
  t.title = "one-token 8+3 replay (Table III) — model " + recorded_model(options);
  // The paper's columns first (its wall is the sum of the invocations, its peak the process's),
  // then psi's own.
  t.columns = {"context", "path", "mode", kWallSum, peak.name, "final video rel L2", "final audio rel L2",
               kWallPerInvocation, "managed arena peak / bound", "max video rel L2 over states", "all finite",
               "final rel L2 to float64 (video / audio)"};
  t.time_columns = {kWallSum, kWallPerInvocation, peak.name};
  std::vector<Table> more;
  std::map<std::string, std::string> reference;
  std::map<std::string, std::uint64_t> seed;
  std::map<std::string, std::string> reference_file;
  // The contexts in the order the run replayed them (one-token first), not by name.
  std::vector<std::string> contexts;
  std::set<std::size_t> invocation_counts;
  for (const OneTokenCase& c : cases) {
    if (!c.result) continue;
    if (std::find(contexts.begin(), contexts.end(), c.context) == contexts.end()) contexts.push_back(c.context);
    const OneTokenResult& p = *c.result;
    const auto& st = p.states;
    bool finite = true;
    for (auto& r : st) finite = finite && r.finite;
    const auto& last = st.at(st.size() - 1);
    const auto [sum, n] = wall_sum(p);
    if (n) invocation_counts.insert(n);
    t.add_row({c.context, c.path, c.mode, n ? fmt_fixed(sum, 3) : "not recorded",
               peak.cell(p.process_peak ? &*p.process_peak : nullptr), fmt_sci(last.video_rel_l2),
               fmt_sci(last.audio_rel_l2), fmt_fixed(p.wall_mean_s, 3) + " ± " + fmt_fixed(p.wall_sd_s, 3),
               peak_cell(p.run), fmt_sci(worst_video(st)), finite ? "yes" : "NO",
               c.states_f64 ? video_audio(c.states_f64->at(c.states_f64->size() - 1)) : "—"});
    reference[c.context] = p.reference;
    seed[c.context] = c.seed;
    if (!p.reference_file.empty()) reference_file[c.context] = p.reference_file;
  }
  std::string counts;
  for (std::size_t n : invocation_counts) counts += (counts.empty() ? "" : " or ") + std::to_string(n);
  t.notes.push_back(std::string(kWallSum) + ": the path's " + (counts.empty() ? "" : counts + " ") +
                    "invocation walls added up, the paper's wall; " + kWallPerInvocation +
                    ": the same invocations' mean and sample SD. " + peak.name +
                    ": over the path's own run (reset as it starts); the managed arena peak is the PSI executor's "
                    "own accounting, not the process's.");
  t.notes.push_back(paper_note("Table III, LTX-2 22B: per path the wall summed over the eleven invocations and the "
                               "process peak; psi's one-token-context rows correspond path by path, and the values "
                               "are in the paper's Table III",
                               options));
  const auto states = [](const OneTokenCase& c) -> const std::vector<StateDistance>& { return c.result->states; };
  const auto states_f64 = [](const OneTokenCase& c) -> const std::vector<StateDistance>& { return *c.states_f64; };
  for (const std::string& context : contexts) {
    const std::string& ref = reference.at(context);
    std::vector<const OneTokenCase*> paths, with_f64;
    for (const OneTokenCase& c : cases) {
      if (c.context != context) continue;
      if (c.result) paths.push_back(&c);
      if (c.states_f64) with_f64.push_back(&c);
    }
    more.push_back(per_state("per-state relative L2 to " + ref + ", " + context + " context (video / audio)", paths,
                             states));
    t.notes.push_back(context + " reference: " + ref + " (SynthInit seed " + std::to_string(seed[context]) + ")");
    if (reference_file.count(context)) note_recording(t, context + " recording", reference_file[context], {});
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
    for (const OneTokenCase* c : with_f64) {
      if (c->float64_wall)
        f.notes.push_back("float64 run: invocation wall " + fmt_fixed(c->float64_wall->mean_s, 3) + " ± " +
                          fmt_fixed(c->float64_wall->sd_s, 3) + " s (free-running).");
      const auto& last = c->states_f64->at(c->states_f64->size() - 1);
      f.add_row({c->path, c->mode, fmt_sci(last.video_rel_l2), fmt_sci(last.audio_rel_l2),
                 differing(last.video_differing, last.video_total), differing(last.audio_differing, last.audio_total),
                 fmt_sci(worst_video(*c->states_f64))});
    }
    more.push_back(std::move(f));
    more.push_back(per_state("per-state relative L2 to the float64 trajectory, " + context + " context (video / audio)",
                             with_f64, states_f64));
  }
  t.notes.push_back("teacher-forced: each step starts from the recorded state. baseline and modified run their blocks "
                    "through the PSI executor (default arena, reuse+prefetch); per-invocation arena numbers are in the "
                    "report's cases.");
  if (options.value("quick", false))
    t.notes.push_back("--quick: the one-token context only; the 1,024-row-context replay (" +
                      probes::trajectory_recording(1024).file + ") is left out.");
  std::vector<Table> out{t};
  out.insert(out.end(), more.begin(), more.end());
  return out;
}

void settle_one_token(Options& o) {
  // The recorded trajectory is the tiny ltx25 model's on SynthInit weights: when one-token
  // compares with it, it computes with the recording's seed (experiments/one_token.cpp).
  const probes::TrajectoryRecording& recorded = probes::trajectory_recording(1);
  const std::filesystem::path file = reference_dir(o) / recorded.file;
  if (o.seed_given || o.model != "tiny" || o.profile != "ltx25" || !o.checkpoint.empty() || !std::filesystem::exists(file)) return;
  try {
    o.seed = probes::Recording(file, recorded.group).seed();
  } catch (const Error&) {
    // Unreadable: one-token names it when it reads the recording.
  }
}

const Registration one_token_registration{3, {
    .name = "one-token",
    .reproduces = "Table III",
    .summary = "one-token 8+3 replay: invocation wall and per-state relative L2 of " + replayed_list() +
               " to the recorded official trajectory, and every path's distance to the float64 trajectory",
    .run = run_one_token,
    .tabulate = tabulate_one_token,
    .settle = settle_one_token,
    .options = {{.flag = "--capture",
                 .help = "one-token: FILE: also write teacher-forced step 1 of the recorded one-token trajectory "
                         "under official-h200, every product and attention core with its inputs and output (the "
                         "layout psi probe trajectory-step replays; docs/official-kernels.md)",
                 .apply = set_capture}},
    .own_defaults = OneTokenOptions{},
    .reread = reread_as<OneTokenCase>,
    .time_fields = time_keys_of<OneTokenCase>,
    .provenance_fields = provenance_keys_of<OneTokenCase>}};

}  // namespace psi::exp
