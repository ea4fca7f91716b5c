// full-prompt (Table II, Fig. 3): the nine-case cohort — three prompts (spokesperson, chef,
// airliner) x three request seeds — with 1,024-row text contexts, through every numerics variant
// (engine/model/variant.cpp). Per path, as the paper's Table II: the wall summed over the eleven invocations
// (mean ± SD over the cases), the process peak and the endpoint relative L2 to official-h200 (psi's
// bitwise reproduction of the official MATH arithmetic, the paper's reference); then how many
// cases modified beats baseline in and the mean paired Δ = modified − baseline, and per case the
// same with the dense path beside it. Text encoders are not available, so
// each prompt's projected context is SynthInit named by the prompt; noise is SynthInit with
// the request seed, shared by every path of a case.
#include "experiments/experiment.h"
#include "experiments/report.h"

#include <algorithm>
#include <array>
#include <map>

#include "engine/error.h"
#include "engine/model/variant.h"
#include "engine/pipeline/context_mask.h"
#include "engine/progress.h"
#include "experiments/paper_line.h"
#include "experiments/process_peak.h"
#include "experiments/trajectory_support.h"
#include "report/figures.h"
#include "report/stats.h"

namespace psi::exp {

namespace {

struct Prompt {
  const char* name;
  int valid_tokens;  // the tokenizer's valid length before padding to 1,024 (metadata only)
};
constexpr std::array<Prompt, 3> kPrompts{{{"spokesperson", 87}, {"chef", 76}, {"airliner", 77}}};
// Request seeds fixed before execution (run #1-#3); any unsigned 64-bit value is valid.
constexpr std::array<std::uint64_t, 3> kRequestSeeds{185ull, 0x9E3779B97F4A7C15ull, 18446744073709551557ull};
constexpr std::int64_t kContextLen = 1024;

// The paths the table's arithmetic is taken over, by their roles in the registry: the paper's
// reference (the variant that claims the official MATH path, bit for bit), psi's dense path, and
// the paper's baseline and modified PSI, whose Δ is the table's.
struct Roles {
  const std::string& reference = model::variant_claiming("math").name;
  const std::string& dense = model::variant_with_role(model::VariantRole::psi_reference).name;
  const std::string& baseline = model::variant_with_role(model::VariantRole::paper_baseline).name;
  const std::string& modified = model::variant_with_role(model::VariantRole::paper_modified).name;
};

}  // namespace

// The options of full-prompt alone.
struct FullPromptOptions {
  bool zero_mask = false;  // an explicit all-zero context mask, checked and elided
  static auto fields() { return std::tuple{field_if_present("zero_mask", &FullPromptOptions::zero_mask)}; }
};

// One path of a case: its endpoint against the dense path's and against official-h200's.
struct FullPromptPath {
  double wall_mean_s = 0, wall_sd_s = 0;
  nlohmann::json per_invocation, run;  // run: null for the dense path
  double endpoint_video_rel_l2 = 0, endpoint_audio_rel_l2 = 0;  // to the dense path
  bool all_finite = true;
  std::optional<double> official_video_rel_l2, official_audio_rel_l2;  // absent in reports before them
  std::optional<ProcessPeak> process_peak;                             // likewise
  static auto fields() {
    using R = FullPromptPath;
    return std::tuple{field("wall_mean_s", &R::wall_mean_s).measures_time(),
                      field("wall_sd_s", &R::wall_sd_s).measures_time(),
                      field_if_present("per_invocation", &R::per_invocation).holds_time("wall_s"),
                      field("run", &R::run),
                      field("endpoint_video_rel_l2", &R::endpoint_video_rel_l2),
                      field("endpoint_audio_rel_l2", &R::endpoint_audio_rel_l2),
                      field_if_present("all_finite", &R::all_finite),
                      field_optional("official_video_rel_l2", &R::official_video_rel_l2),
                      field_optional("official_audio_rel_l2", &R::official_audio_rel_l2),
                      fields_flat(&R::process_peak)};
  }
};

// One (prompt, request seed) case, every path's endpoint against the dense path.
struct FullPromptCase {
  std::string prompt;
  std::optional<std::string> context_mask;  // --zero-mask: the elision check's verdict; else null
  int valid_tokens = 0;
  int run = 0;                              // request seed #1-#3
  std::string request_seed;                 // decimal: the seeds exceed a JSON double's integers
  std::map<std::string, FullPromptPath> paths;
  static auto fields() {
    using R = FullPromptCase;
    return std::tuple{field("prompt", &R::prompt),
                      field_nullable("context_mask", &R::context_mask),
                      field_if_present("valid_tokens", &R::valid_tokens),
                      field("run", &R::run),
                      field_if_present("request_seed", &R::request_seed),
                      field("paths", &R::paths)};
  }
  // The path's record; a psi::Error naming it when the case has none (a report of other paths).
  const FullPromptPath& path(const std::string& name) const {
    const auto it = paths.find(name);
    if (it == paths.end()) throw Error("full-prompt case " + prompt + " #" + std::to_string(run) + ": no " + name + " path");
    return it->second;
  }
};

void run_full_prompt(const Options& o, Report& report) {
  const model::ModelConfig c = model::model_config(o.model, o.profile);
  auto weights = make_weights(o, o.seed);
  long cases = 0;  // this shard's
  for (std::int64_t i = 0; i < std::int64_t(kPrompts.size() * kRequestSeeds.size()); ++i)
    cases += o.in_shard(i) && !(o.quick && i > 0);
  Progress::expect_parts(cases * long(model::numerics_variant_names().size()));  // one trajectory per path
  for (std::size_t p = 0; p < kPrompts.size(); ++p)
    for (std::size_t s = 0; s < kRequestSeeds.size(); ++s) {
      const std::int64_t index = std::int64_t(p * kRequestSeeds.size() + s);
      if (!o.in_shard(index) || (o.quick && index > 0)) continue;  // --quick: the first case only
      pipeline::TrajectoryCase tc{"full_prompt", std::string("full_prompt.") + kPrompts[p].name, kContextLen,
                                  kRequestSeeds[s], o.seed};
      FullPromptCase rec{kPrompts[p].name, std::nullopt, kPrompts[p].valid_tokens, int(s + 1),
                         std::to_string(kRequestSeeds[s]), {}};
      if (own_options<FullPromptOptions>(o).zero_mask) {
        // The distilled pipeline passes no mask; with --zero-mask an explicit all-zero additive
        // mask over the 1,024 rows goes through the FLASH elision check before being dropped.
        const pipeline::MaskCheck mc = pipeline::check_zero_mask(F32Tensor({1, 1, kContextLen}));
        if (!mc.elidable) throw Error("full-prompt: context mask " + mc.reason);
        rec.context_mask = mc.reason;
      }
      const Roles roles;
      std::vector<pipeline::SavedState> dense;
      std::map<std::string, pipeline::SavedState> endpoints;
      for (const std::string& path : model::numerics_variant_names()) {
        const std::string label = "full-prompt case " + std::to_string(index + 1) + "/9 " + kPrompts[p].name +
                                  " #" + std::to_string(s + 1) + " " + path;
        PathRun run = run_path(o, c, *weights, tc, path, label);
        const auto& result = run.result;
        auto [mean, sd] = wall_mean_sd(result.invocations);
        if (path == roles.dense) dense = result.states;  // the registry's first path
        const auto cmp = compare_states(result.states, dense);
        bool finite = true;
        for (auto& r : cmp) finite = finite && r.finite;
        rec.paths[path] = {mean, sd, run.invocations, run.run, cmp.back().video_rel_l2, cmp.back().audio_rel_l2, finite,
                           std::nullopt, std::nullopt, run.process_peak};
        endpoints.emplace(path, result.states.back());
        save_states(report, "/states/case" + std::to_string(index + 1) + "/" + path, result.states, path);
      }
      // The paper's reference is official MATH: official-h200, which runs after dense.
      const pipeline::SavedState& official = endpoints.at(roles.reference);
      for (auto& [path, rec_path] : rec.paths) {
        const StateDistance d = compare_states({endpoints.at(path)}, {official}).front();
        rec_path.official_video_rel_l2 = d.video_rel_l2;
        rec_path.official_audio_rel_l2 = d.audio_rel_l2;
      }
      report.add_case(index, rec);
    }
}

namespace {

constexpr const char* kPathWall = "wall (s, sum of the invocations; mean ± SD over the cases)";

// A path's invocation walls added up, the paper's wall (per_invocation's wall_s); none recorded:
// nullopt.
std::optional<double> wall_sum(const FullPromptPath& p) {
  if (!p.per_invocation.is_array() || p.per_invocation.empty()) return std::nullopt;
  double sum = 0;
  for (const auto& i : p.per_invocation) sum += i.at("wall_s").get<double>();
  return sum;
}

std::string sum_cell(const FullPromptCase& c, const std::string& path) {
  const auto it = c.paths.find(path);
  const std::optional<double> s = it == c.paths.end() ? std::nullopt : wall_sum(it->second);
  return s ? fmt_fixed(*s, 3) : "-";
}

std::string signed_sci(double v) { return (v >= 0 ? "+" : "") + fmt_sci(v); }

std::string opt_sci(const std::optional<double>& v) { return v ? fmt_sci(*v) : "-"; }

// Modified against baseline on one modality over the cases that recorded both against
// official-h200: how many cases modified's error is lower in, and the mean paired Δ.
struct Paired {
  int beats = 0, cases = 0;
  double delta_sum = 0;
  void add(const std::optional<double>& base, const std::optional<double>& mod) {
    if (!base || !mod) return;
    ++cases;
    beats += *mod < *base;
    delta_sum += *mod - *base;
  }
  std::string line(const char* modality) const {
    return std::string(modality) + " " + std::to_string(beats) + "/" + std::to_string(cases);
  }
  std::string delta(const char* modality) const {
    return signed_sci(delta_sum / double(cases)) + " " + modality;
  }
};

}  // namespace

std::vector<Table> tabulate_full_prompt(const nlohmann::json& case_records, const nlohmann::json& options) {
  const auto cases = case_records.get<std::vector<FullPromptCase>>();
  const Roles roles;
  const std::string& kReference = roles.reference;
  std::vector<std::string> paths;  // the run's order
  for (const std::string& v : model::numerics_variant_names())
    for (const FullPromptCase& c : cases)
      if (c.paths.count(v)) {
        paths.push_back(v);
        break;
      }
  std::vector<const ProcessPeak*> peaks;
  for (const FullPromptCase& c : cases)
    for (const auto& [name, p] : c.paths) peaks.push_back(p.process_peak ? &*p.process_peak : nullptr);
  const ProcessPeakColumn peak = process_peak_column(peaks);

  Table t;
  t.title = "full-prompt cohort (Table II) — model " + recorded_model(options) + ", 1,024-row contexts, " +
            std::to_string(cases.size()) + " cases: per path, endpoint relative L2 to " + kReference;
  t.columns = {"path", kPathWall, peak.name, "video endpoint rel L2 (mean ± SD)", "audio endpoint rel L2 (mean ± SD)",
               "video / audio endpoint rel L2 to dense (mean)", "managed arena peak (largest)"};
  t.time_columns = {kPathWall, peak.name};
  for (const std::string& path : paths) {
    std::vector<double> walls, video, audio, dense_video, dense_audio;
    const ProcessPeak* largest = nullptr;
    double managed = -1;
    for (const FullPromptCase& c : cases) {
      const auto it = c.paths.find(path);
      if (it == c.paths.end()) continue;
      const FullPromptPath& p = it->second;
      if (const auto s = wall_sum(p)) walls.push_back(*s);
      if (p.official_video_rel_l2) video.push_back(*p.official_video_rel_l2);
      if (p.official_audio_rel_l2) audio.push_back(*p.official_audio_rel_l2);
      dense_video.push_back(p.endpoint_video_rel_l2);
      dense_audio.push_back(p.endpoint_audio_rel_l2);
      // The path's peak is the largest of its cases'; a case without a figure gives its reason.
      const ProcessPeak* pk = p.process_peak ? &*p.process_peak : nullptr;
      if (!largest || (pk && pk->bytes && (!largest->bytes || *pk->bytes > *largest->bytes))) largest = pk;
      if (!p.run.is_null()) managed = std::max(managed, p.run["managed_peak_bytes"].get<double>());
    }
    const auto errors = [](const std::vector<double>& v) {
      return v.empty() ? std::string("-") : fmt_sci(mean(v)) + " ± " + fmt_sci(sample_sd(v));
    };
    t.add_row({path, walls.empty() ? "-" : fmt_fixed(mean(walls), 3) + " ± " + fmt_fixed(sample_sd(walls), 3),
               peak.cell(largest), errors(video), errors(audio),
               fmt_sci(mean(dense_video)) + " / " + fmt_sci(mean(dense_audio)),
               managed < 0 ? "no arena (whole tensors)" : fmt_mib(managed)});
  }

  Table per_case;
  per_case.title = "full-prompt cohort, per case: endpoint relative L2 to " + kReference;
  const std::string &b = roles.baseline, &m = roles.modified, &dense_name = roles.dense;
  const std::string case_wall = "wall " + b + " / " + m + " (s, sum of the invocations)";
  const std::string dense_wall = "wall " + dense_name + " / " + kReference + " (s, sum of the invocations)";
  per_case.columns = {"case", "prompt", "run", b + " video", m + " video", "Δ video (mod − base)",
                      b + " audio", m + " audio", "Δ audio", m + " beats " + b + " (video / audio)",
                      case_wall, dense_wall, dense_name + " video / audio",
                      "to " + dense_name + ": " + b + " video / " + m + " video"};
  per_case.time_columns = {case_wall, dense_wall};
  Paired video, audio;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const FullPromptCase& c = cases[i];
    const FullPromptPath &base = c.path(b), &mod = c.path(m);
    video.add(base.official_video_rel_l2, mod.official_video_rel_l2);
    audio.add(base.official_audio_rel_l2, mod.official_audio_rel_l2);
    const auto difference = [](const std::optional<double>& b, const std::optional<double>& m) {
      return b && m ? signed_sci(*m - *b) : std::string("-");
    };
    const auto beats = [](const std::optional<double>& b, const std::optional<double>& m) {
      return b && m ? std::string(*m < *b ? "yes" : "no") : std::string("-");
    };
    const auto dense = c.paths.find(dense_name);
    per_case.add_row({std::to_string(case_index(case_records[i]) + 1), c.prompt, std::to_string(c.run),
                      opt_sci(base.official_video_rel_l2), opt_sci(mod.official_video_rel_l2),
                      difference(base.official_video_rel_l2, mod.official_video_rel_l2), opt_sci(base.official_audio_rel_l2),
                      opt_sci(mod.official_audio_rel_l2), difference(base.official_audio_rel_l2, mod.official_audio_rel_l2),
                      beats(base.official_video_rel_l2, mod.official_video_rel_l2) + " / " +
                          beats(base.official_audio_rel_l2, mod.official_audio_rel_l2),
                      sum_cell(c, b) + " / " + sum_cell(c, m),
                      sum_cell(c, dense_name) + " / " + sum_cell(c, kReference),
                      dense == c.paths.end() ? "-"
                                             : opt_sci(dense->second.official_video_rel_l2) + " / " +
                                                   opt_sci(dense->second.official_audio_rel_l2),
                      fmt_sci(base.endpoint_video_rel_l2) + " / " + fmt_sci(mod.endpoint_video_rel_l2)});
  }
  // The summary lines: the paper's counts and mean paired Δ, over the cases this report holds.
  if (video.cases > 0)
    t.notes.push_back(m + " beats " + b + " (a lower endpoint relative L2 to " + kReference + "): " +
                      video.line("video") + ", " + audio.line("audio") + " cases; mean paired Δ = " + m + " − " + b +
                      ": " + video.delta("video") + ", " + audio.delta("audio") + ".");
  else
    t.notes.push_back(m + " beats " + b + ": not recorded (a report before the endpoints were compared with " +
                      kReference + ").");
  t.notes.push_back(paper_note("Table II and its text, LTX-2 22B: modified beats baseline in 5/9 video and 3/9 audio "
                               "cases, mean paired Δ +0.0378 video, +0.0395 audio (Δ as the paper's text defines it); "
                               "the walls and process peaks per path are in the paper's Table II",
                               options));
  t.notes.push_back("reference: " + kReference + ", psi's bitwise reproduction of the official MATH arithmetic, the "
                    "paper's reference; " + dense_name + " (psi's whole-tensor path) is an extra column. wall: the "
                    "invocation walls of a case added up, the paper's wall. " + peak.name +
                    ": the largest of the path's cases, each over the path's own run.");
  if (!cases.empty() && cases[0].context_mask) t.notes.push_back("--zero-mask: " + *cases[0].context_mask);
  t.notes.push_back("request seeds (run #1-#3): 185, 11400714819323198485, 18446744073709551557; "
                    "valid tokenizer lengths spokesperson 87, chef 76, airliner 77 (metadata; all 1,024 rows attended, "
                    "as the official distilled pipeline passes no context mask).");
  return {t, per_case};
}

std::vector<Figure> figures_full_prompt(const nlohmann::json& case_records) {
  const auto cases = case_records.get<std::vector<FullPromptCase>>();
  const Roles roles;
  // Against official-h200, the paper's reference, as the table; reports before the endpoints were
  // compared with it draw against dense, and say so.
  bool official = !cases.empty();
  for (const FullPromptCase& c : cases)
    official = official && c.path(roles.baseline).official_video_rel_l2 && c.path(roles.modified).official_video_rel_l2;
  const std::string reference = official ? roles.reference : roles.dense;
  const auto error = [&](const FullPromptPath& p) { return official ? *p.official_video_rel_l2 : p.endpoint_video_rel_l2; };
  DotPlot fig;
  fig.title = "Endpoint error to " + reference + ", per case (Fig. 3 style)";
  fig.y_label = "relative L2 (video endpoint)";
  // Δ is a few percent of the errors: invisible on their log axis, so it has a linear figure.
  BarChart delta;
  delta.title = "Δ = modified − baseline, video endpoint relative L2 to " + reference + ", per case (the table's Δ video)";
  delta.y_label = "Δ relative L2";
  for (const FullPromptCase& c : cases) {
    const std::string label = c.prompt.substr(0, 5) + "#" + std::to_string(c.run);
    // Every path but the reference itself (0, off a log axis); reports before official-h200 have none.
    for (const std::string& path : model::numerics_variant_names())
      if (path != reference && c.paths.count(path) && (!official || c.path(path).official_video_rel_l2))
        fig.points.push_back({label, path, error(c.path(path))});
    delta.bars.push_back({label, roles.modified + " − " + roles.baseline,
                          error(c.path(roles.modified)) - error(c.path(roles.baseline))});
  }
  return {{"endpoint_error", render_svg(fig)}, {"endpoint_delta", render_svg(delta)}};
}

const Registration full_prompt_registration{2, {
    .name = "full-prompt",
    .reproduces = "Table II, Fig. 3",
    .summary = "nine-case cohort (3 prompts x 3 request seeds, 1,024-row contexts): " + model::numerics_variant_list() +
               "; invocation wall and endpoint relative L2 with Δ = modified − baseline",
    .run = run_full_prompt,
    .tabulate = tabulate_full_prompt,
    .shardable = true,
    .figures = figures_full_prompt,
    .options = {{.flag = "--zero-mask",
                 .help = "full-prompt: pass an explicit all-zero context mask through the FLASH mask-elision check",
                 .takes_value = false,
                 .apply = [](const std::string&, Options& o) { set_own_options(o, FullPromptOptions{true}); }}},
    .own_defaults = FullPromptOptions{},
    .reread = reread_as<FullPromptCase>,
    .time_fields = time_keys_of<FullPromptCase>,
    .provenance_fields = provenance_keys_of<FullPromptCase>}};

}  // namespace psi::exp
