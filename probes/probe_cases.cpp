#include "probes/probe_cases.h"

#include <algorithm>
#include <chrono>

#include "engine/environment.h"
#include "engine/error.h"
#include "engine/interrupt.h"
#include "engine/progress.h"
#include "engine/sha256.h"
#include "hdf5/h5.h"
#include "hdf5/state_file.h"
#include "hdf5/unverified.h"
#include "probes/case_context.h"
#include "probes/provenance.h"
#include "psi_version.h"

namespace psi::probes {

using detail::CaseContext;

const std::vector<ProbeCase>& probe_cases() {
  static const std::vector<ProbeCase> cases = {
      {"audio-ff-up", "probes_linear.h5", "", "probe_audio_ff_up",
       "audio FFN up-projection (Linear 2048->8192 with bias) and tanh-GELU on 126 tokens"},
      {"video-q-proj", "probes_linear.h5", "", "probe_video_q_proj",
       "video self-attention to_q (Linear 4096->4096 with bias) on 256 tokens"},
      {"audio-self-attn", "probe_attn_traj.h5", "", "probe_audio_self_attn",
       "audio self-attention module (32 heads x 64, gated, RoPE) on 126 tokens"},
      {"block-small", "block_small.h5", "", "block_small", "one AV block, video 512 / audio 256, profile ltx25"},
      {"block-small-alt", "block_small_alt.h5", "", "block_small_alt", "block-small under profile ltx2"},
      {"block-small-ctx1024", "block_small_ctx1024.h5", "", "block_small_ctx1024",
       "block-small with 1,024-row text contexts"},
      {"block-full", "block_full_math.h5", "block_full_flash.h5", "block_full_first",
       "the full-size first block (4,928 video tokens; video probes rows 0-255 stored)"},
      {"block-full-ctx1024", "block_full_ctx1024.h5", "", "block_full_ctx1024",
       "the full-size first block with 1,024-row text contexts (MATH only)"},
  };
  return cases;
}

const ProbeCase& probe_case(std::string_view name) {
  for (const auto& c : probe_cases())
    if (c.name == name) return c;
  std::string known;
  for (const auto& c : probe_cases()) known += (known.empty() ? "" : ", ") + c.name;
  throw Error("unknown probe case '" + std::string(name) + "' (known: " + known + ")");
}

const std::vector<TrajectoryRecording>& trajectory_recordings() {
  static const std::vector<TrajectoryRecording> recorded = {
      {"one-token", "probe_attn_traj.h5", "trajectory_tiny", 1},
      {"ctx1024", "trajectory_ctx1024.h5", "trajectory_tiny_ctx1024", 1024},
  };
  return recorded;
}

const TrajectoryRecording& trajectory_recording(std::int64_t context_rows) {
  for (const auto& t : trajectory_recordings())
    if (t.context_rows == context_rows) return t;
  throw Error("tiny trajectory: a context of " + std::to_string(context_rows) + " rows is not recorded (1 or 1024)");
}

std::filesystem::path shared_dir() {
  if (auto s = env_shared()) return *s;
  return PSI_SHARED_DIR_DEFAULT;
}

ProbeFiles probe_files(const ProbeCase& pc, const ProbeOptions& opt) {
  ProbeFiles f;
  f.file = opt.reference.empty() ? shared_dir() / "reference" / pc.default_file : opt.reference;
  if (!opt.flash_reference.empty())
    f.flash_file = opt.flash_reference;
  else if (opt.reference.empty() && !pc.flash_default_file.empty())
    f.flash_file = shared_dir() / "reference" / pc.flash_default_file;
  return f;
}

ProbeReport run_probe(std::string_view case_name, const ProbeOptions& opt) {
  const ProbeCase& pc = probe_case(case_name);
  const auto t0 = std::chrono::steady_clock::now();
  ProbeReport report;
  report.case_name = pc.name;
  report.backend = opt.runtime ? std::string(rt::backend_name(*opt.runtime)) : "host";
  report.group = pc.group;
  const ProbeFiles files = probe_files(pc, opt);
  report.file = files.file;
  report.flash_file = files.flash_file;

  // What this probe reads unchecked is what the process's record gains while it runs.
  const std::size_t unverified_before = hdf5::unverified_data().size();
  Recording rec(report.file, pc.group);
  report.seed = rec.seed();
  std::optional<Recording> flash;
  if (!report.flash_file.empty()) {
    flash.emplace(report.flash_file, pc.group);
    if (flash->seed() != rec.seed())
      throw Error(report.flash_file.string() + ": seed " + std::to_string(flash->seed()) + " but " +
                  report.file.string() + " has " + std::to_string(rec.seed()));
    // The FLASH recording is the official implementation's own control only where it ran the MATH
    // recording's weights: every weight it declares must be one the MATH recording declares.
    Manifest flash_declared = recording_manifest(*flash);
    flash_declared.source = "the FLASH recording " + flash_declared.source;
    check_manifest(recording_manifest(rec), flash_declared);
  }
  CaseContext ctx{rec, flash ? &*flash : nullptr, report, {}, opt.runtime};
  ctx.explain = opt.explain;
  ctx.differences = opt.differences;
  const auto names = opt.variants.empty() ? model::numerics_variant_names() : opt.variants;
  for (const auto& n : names) {
    if (n == kFloat64Variant)
      ctx.float64 = true;
    else
      ctx.variants.push_back(model::numerics_variant(n).with_kernels(opt.kernels));
  }
  if (ctx.float64 && !pc.name.starts_with("block-"))
    throw Error("probe " + pc.name + ": variant float64 is the float64 block, for block cases only");
  if (ctx.explain && !pc.name.starts_with("block-"))
    throw Error("probe " + pc.name + ": --explain-differences attributes block probes, for block cases only");

  // A variant of the full block takes minutes: a line per variant, and between them the pulse of
  // the operators' tasks (engine/progress.h), also when stderr is a log.
  Progress progress("probe " + pc.name, long(ctx.variants.size()) + (ctx.float64 ? 1 : 0));
  ctx.progress = &progress;
  if (pc.name == "audio-ff-up" || pc.name == "video-q-proj")
    detail::run_linear_case(ctx, pc.name);
  else if (pc.name == "audio-self-attn")
    detail::run_attention_case(ctx);
  else
    detail::run_block_case(ctx);
  report.seconds = seconds_since(t0);
  const auto& unverified = hdf5::unverified_data();
  report.unverified.assign(unverified.begin() + std::ptrdiff_t(unverified_before), unverified.end());
  return report;
}

void write_probe_outputs(const ProbeReport& r, const std::filesystem::path& out, const std::string& device_name) {
  hdf5::RunInfo run;
  run.experiment = "probe " + r.case_name;
  run.model_config = "recorded case " + r.case_name;
  run.backend = r.backend;
  run.device_name = device_name;
  run.seed = r.seed;
  hdf5::StateWriter w(out, run);
  w.set_attrs("/", {{"reference_file", r.file.string()}, {"reference_group", r.group}});
  for (const auto& [variant, tensors] : r.outputs) {
    const std::string g = "/" + r.group + "/" + variant;
    w.set_attrs(g, {{"summary", model::numerics_variant(variant).summary}});
    for (const auto& [name, t] : tensors) w.write(g + "/" + name, t, {variant, "psi's " + name + " of " + r.case_name, "", {}});
  }
  if (!r.float64_outputs.empty()) {
    const std::string v(kFloat64Variant), g = "/" + r.group + "/" + v;
    w.set_attrs(g, {{"summary", std::string("the dense block in float64 from the same BF16 weights and inputs")}});
    for (const auto& [name, t] : r.float64_outputs) w.write(g + "/" + name, t, {v, "float64 " + name + " of " + r.case_name, "", {}});
  }
  w.commit();
}

std::vector<ClaimCheck> check_claims(const ProbeReport& r) {
  std::vector<ClaimCheck> checks;
  for (std::size_t i = 0; i < r.results.size(); ++i) {
    const TensorResult& t = r.results[i];
    if (t.variant == kFloat64Variant) continue;
    const std::string& path = model::numerics_variant(t.variant).claims;
    if (path.empty()) continue;
    auto it = std::find_if(checks.begin(), checks.end(), [&](const ClaimCheck& c) { return c.variant == t.variant; });
    if (it == checks.end())
      it = checks.insert(checks.end(), ClaimCheck{t.variant, path, 0, {}, {}, !r.unverified.empty()});
    if (t.backend != path && t.backend != "official") continue;
    if (!t.distance && !t.full_sha_equal) continue;  // nothing stored to compare with
    ++it->checked;
    if ((t.distance && !t.distance->bitwise_equal()) || (t.full_sha_equal && !*t.full_sha_equal)) {
      it->failed.push_back(t.tensor);
      it->failed_results.push_back(i);
    }
  }
  return checks;
}

}  // namespace psi::probes
