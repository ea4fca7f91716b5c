#include "experiments/trajectory_support.h"

#include <cmath>
#include <tuple>

#include "engine/error.h"
#include "engine/exec/executor.h"
#include "engine/model/variant.h"
#include "engine/pipeline/checkpoint_weights.h"
#include "engine/progress.h"
#include "engine/runtime/run_report.h"
#include "engine/whole_number.h"
#include "experiments/block_support.h"
#include "hdf5/h5.h"
#include "hdf5/schema.h"
#include "probes/element_differences.h"
#include "engine/distance.h"
#include "report/stats.h"

namespace psi::exp {

RecordedTrajectory read_recorded_trajectory(const std::filesystem::path& file, const std::string& group) {
  // The seed as every reader of a recording reads it (a missing or malformed one refused), and
  // the provenance the group declares checked against psi's regeneration: the contexts and noise
  // psi draws itself must be the recorded ones, and the weights are checked as they load.
  probes::Recording rec(file, group);
  const hdf5::File& f = rec.file();
  const std::string g = "/" + group;
  RecordedTrajectory r;
  r.file = file;
  r.group = group;
  r.seed = rec.seed();
  r.manifest = probes::recording_manifest(rec, true);
  probes::check_recorded_inputs(rec, r.manifest);
  if (auto l = f.attr(g, "text_context_len"); l && std::holds_alternative<std::string>(*l)) {
    const std::string& text = std::get<std::string>(*l);
    const auto len = parse_whole(text, 1, std::uint64_t(1) << 31);
    if (!len) throw Error(file.string() + ": /" + group + " attribute text_context_len '" + text + "' is not a row count");
    r.context_len = std::int64_t(*len);
  } else if (f.exists(g + "/inputs/video.context"))
    r.context_len = f.info(g + "/inputs/video.context").shape.at(1);
  static const char* names[] = {"00_stage1_initial", "01_stage1_step1", "02_stage1_step2", "03_stage1_step3",
                                "04_stage1_step4",   "05_stage1_step5", "06_stage1_step6", "07_stage1_step7",
                                "08_stage1_step8",   "09_inter_stage",  "10_stage2_step1", "11_stage2_step2",
                                "12_stage2_step3"};
  for (const char* n : names) {
    const std::string sg = g + "/" + n;
    if (!f.exists(sg)) throw Error(file.string() + ": trajectory '" + group + "' lacks state " + n);
    pipeline::SavedState s;
    s.name = n;
    auto num = [&](const char* a) {
      auto v = f.attr(sg, a);
      return v && std::holds_alternative<double>(*v) ? float(std::get<double>(*v)) : 0.0f;
    };
    s.sigma_from = num("sigma_from");
    s.sigma_to = num("sigma_to");
    s.video = f.read_bf16(sg + "/video_latent");
    s.audio = f.read_bf16(sg + "/audio_latent");
    hdf5::verify_sha256_full(f, sg + "/video_latent", s.video);
    hdf5::verify_sha256_full(f, sg + "/audio_latent", s.audio);
    r.states.push_back(std::move(s));
  }
  return r;
}

namespace {

template <class E>
std::vector<StateDistance> compare_rows(const std::vector<pipeline::SavedState>& ours,
                                        const std::vector<pipeline::SavedStateOf<E>>& ref) {
  std::vector<StateDistance> rows;
  for (std::size_t i = 0; i < ours.size() && i < ref.size(); ++i) {
    if (ours[i].name != ref[i].name || ours[i].video.shape != ref[i].video.shape ||
        ours[i].audio.shape != ref[i].audio.shape)
      throw Error("trajectory state " + ours[i].name + ": does not line up with reference state " + ref[i].name);
    const Distance dv = distance(ours[i].video.span(), ref[i].video.span());
    const Distance da = distance(ours[i].audio.span(), ref[i].audio.span());
    auto finite = [](const Bf16Tensor& t) {
      for (Bf16 b : t.data)
        if (!b.is_finite()) return false;
      return true;
    };
    rows.push_back({ours[i].name, dv.rel_l2, da.rel_l2, dv.differing, da.differing, dv.total, da.total,
                    finite(ours[i].video) && finite(ours[i].audio)});
  }
  return rows;
}

template <class E>
void save_state_list(Report& r, const std::string& prefix, const std::vector<pipeline::SavedStateOf<E>>& states,
                     const std::string& variant) {
  for (const auto& s : states) {
    const std::string g = prefix + "/" + s.name;
    hdf5::TensorMeta mv{variant, "[1, N_v tokens, 128] patchified video latent", "", {}};
    hdf5::TensorMeta ma{variant, "[1, N_a tokens, 128] patchified audio latent", "", {}};
    r.writer().write(g + "/video_latent", s.video, mv);
    r.writer().write(g + "/audio_latent", s.audio, ma);
    r.writer().set_attrs(g, {{"sigma_from", double(s.sigma_from)}, {"sigma_to", double(s.sigma_to)}});
  }
}

// A progress line over a whole trajectory's blocks, with the caller's own on_block after it.
pipeline::TrajectoryHooks with_progress(Progress& progress, const pipeline::TrajectoryHooks& extra) {
  pipeline::TrajectoryHooks hooks = extra;
  hooks.on_block = [&progress, extra](int stage, int step, int block, int blocks) {
    progress.step("stage " + std::to_string(stage) + " step " + std::to_string(step) + " block " +
                  std::to_string(block) + "/" + std::to_string(blocks));
    if (extra.on_block) extra.on_block(stage, step, block, blocks);
  };
  return hooks;
}

long trajectory_blocks(const model::ModelConfig& c) {
  return long(pipeline::stage1_sigmas().size() + pipeline::stage2_sigmas().size() - 2) * c.layers;
}

}  // namespace

std::vector<StateDistance> compare_states(const std::vector<pipeline::SavedState>& ours,
                                          const std::vector<pipeline::SavedState>& ref) {
  return compare_rows(ours, ref);
}

std::vector<StateDistance> compare_states(const std::vector<pipeline::SavedState>& ours,
                                          const std::vector<pipeline::SavedStateF64>& ref) {
  return compare_rows(ours, ref);
}

int nonfinite_latents(const std::vector<pipeline::SavedState>& states) {
  int n = 0;
  for (const auto& st : states)
    n += (hdf5::tensor_stats(st.video).nonfinite_count > 0) + (hdf5::tensor_stats(st.audio).nonfinite_count > 0);
  return n;
}

std::vector<std::string> state_difference_lines(const std::vector<pipeline::SavedState>& ours,
                                                const std::vector<pipeline::SavedState>& ref,
                                                const std::string& ours_name, const std::string& ref_name) {
  if (ours.size() != ref.size())
    throw Error("state_difference_lines: " + std::to_string(ours.size()) + " states against " +
                std::to_string(ref.size()));
  std::vector<std::string> differing, first;
  for (std::size_t i = 0; i < ours.size(); ++i)
    for (const auto& [latent, a, b] : {std::tuple{"video", &ours[i].video, &ref[i].video},
                                       std::tuple{"audio", &ours[i].audio, &ref[i].audio}}) {
      const std::string what = ours[i].name + "/" + latent + "_latent";
      if (a->shape == b->shape && a->data == b->data) continue;
      differing.push_back(what);
      if (!first.empty()) continue;
      if (a->shape != b->shape)
        first = {what + ": shape " + shape_str(a->shape) + " against " + shape_str(b->shape)};
      else
        first = probes::difference_lines(what, *a, *b, ours_name, ref_name);
    }
  if (differing.empty()) return {};
  std::string list;
  for (const auto& d : differing) list += (list.empty() ? "" : ", ") + d;
  std::vector<std::string> lines{std::to_string(differing.size()) + " of " + std::to_string(2 * ours.size()) +
                                 " latents differ: " + list};
  lines.insert(lines.end(), first.begin(), first.end());
  return lines;
}

std::string nonfinite_note(int n) { return n == 0 ? "" : " (" + std::to_string(n) + " NOT FINITE)"; }

void save_states(Report& r, const std::string& prefix, const std::vector<pipeline::SavedState>& states,
                 const std::string& variant) {
  save_state_list(r, prefix, states, variant);
}

void save_states(Report& r, const std::string& prefix, const std::vector<pipeline::SavedStateF64>& states,
                 const std::string& variant) {
  save_state_list(r, prefix, states, variant);
}

pipeline::TrajectoryResult run_with_progress(const model::ModelConfig& c, model::TensorSource& w,
                                             const pipeline::TrajectoryCase& tc,
                                             const model::NumericsVariant& v, const std::string& label,
                                             const pipeline::TrajectoryHooks& extra) {
  Progress progress(label, trajectory_blocks(c));
  return pipeline::run_trajectory(c, w, tc, v, with_progress(progress, extra));
}

pipeline::TrajectoryResultF64 run_f64_with_progress(const model::ModelConfig& c, model::TensorSource& w,
                                                    const pipeline::TrajectoryCase& tc, const std::string& label,
                                                    const pipeline::TrajectoryHooks& extra) {
  Progress progress(label, trajectory_blocks(c));
  return pipeline::run_trajectory_f64(c, w, tc, with_progress(progress, extra));
}

PathRun run_path(const Options& o, const model::ModelConfig& c, model::TensorSource& host,
                 const pipeline::TrajectoryCase& tc, const std::string& variant, const std::string& label,
                 pipeline::TrajectoryHooks hooks) {
  const rt::ResidentPeak resident;  // from here: this path's own peak, not an earlier one's
  const model::NumericsVariant v = variant_of(o, variant);
  PathRun out;
  std::shared_ptr<const ckpt::WeightSource> blocks;  // outlives the executor, which reads it
  std::unique_ptr<exec::PsiExecutor> ex;
  if (!v.whole_tensors()) {
    blocks = block_weight_source(o, c, tc.context_seed);
    exec::ExecOptions eo;
    eo.backend = rt::backend_name(o.backend);
    if (o.chaos_seed) eo.chaos_seed = o.chaos_seed;
    ex = std::make_unique<exec::PsiExecutor>(c, *blocks, v,
                                             exec::schedule("reuse+prefetch"), exec::default_arena(c), eo);
    hooks.block_runner = [&](int b, const model::BlockInputs& in) { return ex->run_block(b, in); };
    // After the last block of each invocation: the arena's numbers so far.
    auto user = hooks.on_block;
    hooks.on_block = [&, user](int stage, int step, int block, int blocks) {
      if (user) user(stage, step, block, blocks);
      if (block != blocks) return;
      const nlohmann::json r = rt::to_json(ex->report());
      out.invocations.push_back({{"stage", stage},
                                 {"step", step},
                                 {"managed_peak_bytes", r["managed_peak_bytes"]},
                                 {"scratch_high_water_bytes", r["scratch_high_water_bytes"]},
                                 {"arena_bytes", r["arena_bytes"]},
                                 {"h2d_weights_bytes", r["h2d_bytes"]["weights"]},
                                 {"journal_bytes", r["h2d_bytes"]["journal"].get<std::uint64_t>() +
                                                       r["d2h_bytes"]["journal"].get<std::uint64_t>()}});
    };
  }
  out.result = run_with_progress(c, host, tc, v, label, hooks);
  if (ex) out.run = rt::to_json(ex->finish());
  out.process_peak = process_peak(o.backend, out.run, resident);
  for (std::size_t i = 0; i < out.result.invocations.size(); ++i) {
    if (i >= out.invocations.size()) out.invocations.push_back({{"stage", out.result.invocations[i].stage},
                                                                {"step", out.result.invocations[i].step}});
    out.invocations[i]["wall_s"] = out.result.invocations[i].wall_seconds;
  }
  return out;
}

std::pair<double, double> wall_mean_sd(const std::vector<pipeline::Invocation>& inv) {
  if (inv.empty()) return {0.0, 0.0};
  std::vector<double> walls;
  for (auto& i : inv) walls.push_back(i.wall_seconds);
  return {mean(walls), sample_sd(walls)};
}

std::unique_ptr<model::TensorSource> recorded_weights(const RecordedTrajectory& r) {
  return std::make_unique<probes::ManifestSource>(r.manifest, r.seed);
}

std::unique_ptr<model::TensorSource> make_weights(const Options& o, std::uint64_t seed) {
  if (!o.checkpoint.empty()) return pipeline::open_checkpoint(o.checkpoint);
  return std::make_unique<model::SynthInitSource>(seed);
}

}  // namespace psi::exp
