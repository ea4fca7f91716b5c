// transport-control (§IV-C): with the arithmetic fixed (one numerics variant), the whole 8+3
// one-token run through the PSI executor under each of the four schedules — the recompute
// baseline, FFN reuse with the synchronous journal, with the asynchronous journal, with
// prefetch (exec::schedules()) — each written to its own state file, then compared with `psi
// compare`'s comparison against a reference run in a file of its own: the same trajectory on the
// host block (the pipeline's block runner, no executor), whose arithmetic the CPU backend's
// executor claims bit for bit. All 13 saved states per modality must be bitwise equal to it, else
// the run fails (exit 1). On CUDA the executor's products are cuBLASLt's, not the host's
// (docs/cuda-backend.md): there the first schedule's run is the reference, and its row compares
// nothing.
#include "experiments/experiment.h"
#include "experiments/report.h"

#include "engine/exec/executor.h"
#include "engine/model/variant.h"
#include "engine/progress.h"
#include "engine/runtime/run_report.h"
#include "experiments/block_support.h"
#include "experiments/paper_line.h"
#include "experiments/trajectory_support.h"
#include "compare/compare.h"
#include "probes/probe_cases.h"

namespace psi::exp {

// One schedule's run, compared with the reference run's file (compared_to; the run's own file
// when it is the reference, which compares nothing).
struct TransportControlCase {
  std::string schedule, file;
  double wall_mean_s = 0, wall_sd_s = 0;
  nlohmann::json run;
  std::uint64_t chaos_seed = 0;
  std::string compared_to;
  // What the reference run is; absent in reports before the host reference, whose reference was
  // the first schedule's run (compared with itself).
  std::optional<std::string> reference;
  std::int64_t datasets_compared = 0, datasets_equal = 0;
  int compare_exit = 0;
  std::optional<int> states_nonfinite;   // absent in reports before the check
  static auto fields() {
    using R = TransportControlCase;
    return std::tuple{field("schedule", &R::schedule),
                      field_if_present("file", &R::file).provenance(),
                      field("wall_mean_s", &R::wall_mean_s).measures_time(),
                      field("wall_sd_s", &R::wall_sd_s).measures_time(),
                      field("run", &R::run),
                      field_if_present("chaos_seed", &R::chaos_seed),
                      field_if_present("compared_to", &R::compared_to).provenance(),
                      field_optional("reference", &R::reference),
                      field("datasets_compared", &R::datasets_compared),
                      field("datasets_equal", &R::datasets_equal),
                      field("compare_exit", &R::compare_exit),
                      field_optional("states_nonfinite", &R::states_nonfinite)};
  }
};

namespace {

// A run's saved states, in a file beside the report of their own, stamped as this run's.
void write_states(const Options& o, Report& report, const std::filesystem::path& file, const std::string& experiment,
                  const std::vector<pipeline::SavedState>& states, const std::string& variant) {
  hdf5::RunInfo info;
  info.experiment = experiment;
  info.model_config = o.model + "/" + o.profile;
  info.backend = rt::backend_name(o.backend);
  info.device_name = device_name(o.backend);
  info.seed = o.seed;
  hdf5::StateWriter w(file, info);
  report.stamp_side_file(w);
  for (const auto& st : states) {
    w.write("/states/" + st.name + "/video_latent", st.video, hdf5::TensorMeta{variant, "video latent", "", {}});
    w.write("/states/" + st.name + "/audio_latent", st.audio, hdf5::TensorMeta{variant, "audio latent", "", {}});
  }
  w.commit();
}

}  // namespace

void run_transport_control(const Options& o, Report& report) {
  // Each schedule's states go to a file of their own beside the report, as do the host block's
  // (the reference on the CPU backend), named (and so checked by the output rule) before any work.
  std::vector<std::pair<const exec::Schedule*, std::filesystem::path>> runs;
  for (const exec::Schedule& s : exec::schedules())
    // --quick: the synchronous journal against the asynchronous journal with prefetch.
    if (!o.quick || s.name == "ffn-reuse" || s.name == "reuse+prefetch")
      runs.emplace_back(&s, report.side_file("." + s.name + ".h5"));
  const bool host_reference = rt::backend_traits(o.backend).host_bits;
  const std::filesystem::path reference_file = host_reference ? report.side_file(".host.h5") : runs.front().second;
  const std::string reference = host_reference
                                    ? "the same run on the host block (the pipeline's block runner, no executor)"
                                    : "schedule " + runs.front().first->name +
                                          "'s run (on CUDA the host block is not the reference: cuBLASLt products)";

  const model::ModelConfig c = model::model_config(o.model, o.profile);
  const model::NumericsVariant variant = variant_of(o, kRuntimeVariant);
  const exec::ArenaSettings arena = exec::default_arena(c);
  auto weights = block_weight_source(o, c, o.seed);
  auto host = make_weights(o, o.seed);
  exec::ExecOptions eo;
  eo.backend = rt::backend_name(o.backend);
  if (o.chaos_seed) eo.chaos_seed = o.chaos_seed;
  const std::string& inputs = probes::trajectory_recording(1).group;  // the recorded trajectory's input names
  pipeline::TrajectoryCase tc{inputs, inputs, 1, o.seed, o.seed};

  Progress::expect_parts(long(runs.size()) + (host_reference ? 1 : 0));
  // The reference run's states, kept to say where a schedule's differ.
  std::vector<pipeline::SavedState> reference_states;
  if (host_reference) {
    auto ref = run_with_progress(c, *host, tc, variant, "transport-control host block");
    write_states(o, report, reference_file, "transport-control/host", ref.states, variant.name);
    reference_states = std::move(ref.states);
  }
  std::int64_t index = 0;
  for (const auto& [schedule, file] : runs) {
    const exec::Schedule& s = *schedule;
    exec::PsiExecutor ex(c, *weights, variant, s, arena, eo);
    pipeline::TrajectoryHooks hooks;
    hooks.block_runner = [&](int b, const model::BlockInputs& in) { return ex.run_block(b, in); };
    auto result = run_with_progress(c, *host, tc, variant, "transport-control " + s.name, hooks);
    const rt::RunReport run = ex.finish();
    write_states(o, report, file, "transport-control/" + s.name, result.states, variant.name);
    auto [mean, sd] = wall_mean_sd(result.invocations);
    TransportControlCase rec;
    rec.schedule = s.name;
    rec.file = file.string();
    rec.wall_mean_s = mean;
    rec.wall_sd_s = sd;
    rec.run = rt::to_json(run);
    rec.chaos_seed = o.chaos_seed;
    rec.compared_to = reference_file.string();
    rec.reference = reference;
    const int nonfinite = nonfinite_latents(result.states);
    rec.states_nonfinite = nonfinite;
    if (nonfinite != 0)
      report.fail("transport-control: schedule " + s.name + ": " + std::to_string(nonfinite) + " of " +
                  std::to_string(2 * result.states.size()) + " states hold NaN or Inf; their bitwise equality proves nothing");
    // The reference run itself (CUDA's first schedule) is compared with nothing.
    if (file != reference_file) {
      // Both files are read back by name: before and after, they must still be this run's.
      for (const auto& f : {file, reference_file}) report.check_side_file(f);
      const compare::CompareReport cmp = compare::compare_files(file, reference_file);
      for (const auto& f : {file, reference_file}) report.check_side_file(f);
      rec.datasets_compared = std::int64_t(cmp.datasets.size());
      rec.datasets_equal = cmp.count(compare::CompareStatus::equal);
      rec.compare_exit = cmp.exit_code();
      if (cmp.exit_code() != 0)
        report.fail("transport-control: schedule " + s.name + " differs from the reference, " + reference +
                        " (all of it: psi compare " + file.string() + " " + reference_file.string() + ")",
                    state_difference_lines(result.states, reference_states, s.name, "reference"));
    } else {
      reference_states = result.states;
    }
    report.add_case(index++, rec);
  }
}

std::vector<Table> tabulate_transport_control(const nlohmann::json& case_records, const nlohmann::json& options) {
  Table t;
  t.title = "bitwise transport control over the 8+3 run (§IV-C) — model " + recorded_model(options);
  t.columns = {"schedule", "states bitwise equal to the reference", "invocation wall (s, mean ± SD)",
               "weights H2D", "journal H2D + D2H", "blocking syncs", "managed peak / bound"};
  t.time_columns = {"invocation wall (s, mean ± SD)"};
  const auto cases = case_records.get<std::vector<TransportControlCase>>();
  for (const auto& c : cases) {
    const auto& r = c.run;
    // A run compared with its own file (the reference run on CUDA; the first schedule in reports
    // before the host reference) says nothing about itself.
    const bool is_reference = !c.file.empty() && c.compared_to == c.file;
    const std::string equal = is_reference ? "— (the reference)"
                                           : std::to_string(c.datasets_equal) + " / " +
                                                 std::to_string(c.datasets_compared) +
                                                 (c.compare_exit == 0 ? " (equal)" : " (DIFFER)");
    t.add_row({c.schedule, equal + nonfinite_note(c.states_nonfinite.value_or(0)),
               fmt_fixed(c.wall_mean_s, 3) + " ± " + fmt_fixed(c.wall_sd_s, 3), fmt_mib(r["h2d_bytes"]["weights"]),
               fmt_mib(r["h2d_bytes"]["journal"].get<double>() + r["d2h_bytes"]["journal"].get<double>()),
               std::to_string(r["blocking_syncs"].get<long long>()),
               fmt_mib(r["managed_peak_bytes"]) + " / " + fmt_mib(r["bound_bytes"])});
  }
  // The reference's file is where it lay (provenance): two runs written elsewhere differ there only.
  if (!cases.empty()) {
    t.notes.push_back("reference: " +
                      cases.front().reference.value_or("the first schedule's run (a report from before the host "
                                                       "reference)") +
                      ".");
    t.provenance.push_back("reference states: " + cases.front().compared_to);
  }
  t.notes.push_back(std::string("variant ") + kRuntimeVariant + "; 13 states x 2 modalities per run, each run in its own "
                    "file beside the report (check any pair with psi compare).");
  t.notes.push_back(paper_note("§IV-C, LTX-2 22B: transport correctness, the run's saved states bitwise equal whatever "
                               "the schedule; psi's states column corresponds",
                               options));
  return {t};
}

const Registration transport_control_registration{8, {
    .name = "transport-control",
    .reproduces = "§IV-C",
    .summary = "the 8+3 run under the four PSI schedules (recompute, FFN reuse, reuse + async journal, reuse + "
               "prefetch): all saved states bitwise equal to the same run on the host block (CPU backend)",
    .run = run_transport_control,
    .tabulate = tabulate_transport_control,
    .reread = reread_as<TransportControlCase>,
    .time_fields = time_keys_of<TransportControlCase>,
    .provenance_fields = provenance_keys_of<TransportControlCase>}};

}  // namespace psi::exp
