// What the experiments that compute on recordings can honour of --model, --profile, --seed and
// --checkpoint. They run at the recorded shapes with the recording's SynthInit weights and
// seed, so an option that asks for something else would be ignored: it is refused, and the
// options are set to what the run really uses, so that the report records that.
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/error.h"
#include "experiments/drivers.h"
#include "probes/probe_cases.h"
#include "probes/recording.h"

namespace psi::exp {

namespace {

namespace fs = std::filesystem;

// A recording file under the reference folder and one group in it (whose seed is the file's).
struct Recorded {
  std::string file;
  std::string group;
};

// The recording of a probe case (probes/probe_cases.cpp, where every case's file and group are
// written once); `flash` its FLASH file.
Recorded recording_of(std::string_view probe_case, bool flash = false) {
  const probes::ProbeCase& c = probes::probe_case(probe_case);
  return {flash ? c.flash_default_file : c.default_file, c.group};
}

std::string file_list(const std::vector<Recorded>& files) {
  std::string out;
  for (const auto& f : files) out += (out.empty() ? "" : ", ") + f.file;
  return out;
}

// The recordings `files` (names under the reference folder) are of config `model`/`profile`.
void settle_on_recordings(Options& o, const std::string& experiment, const std::string& model,
                          const std::string& profile, const std::vector<Recorded>& files) {
  if (o.model_given && o.model != model)
    throw Error("--model " + o.model + ": " + experiment + " computes the recorded " + model + " tensors (" +
                file_list(files) + ") and cannot run at " + o.model + "; leave --model out");
  if (o.profile != profile)
    throw Error("--profile " + o.profile + ": " + experiment + " computes the recorded profile-" + profile +
                " tensors (" + file_list(files) + "); leave --profile out");
  if (!o.checkpoint.empty())
    throw Error("--checkpoint does not apply to " + experiment +
                ": it computes with the recording's SynthInit weights (" + file_list(files) + ")");
  o.model = model;
  std::optional<std::string> first;  // the file that settled the seed
  for (const auto& [name, group] : files) {
    const fs::path file = reference_dir(o) / name;
    std::uint64_t seed = 0;
    try {
      seed = probes::Recording(file, group).seed();
    } catch (const Error&) {
      // Missing or unreadable: the driver names it when it opens the file, after the output
      // rule has been checked (which must come before anything is read).
      continue;
    }
    if (o.seed_given && o.seed != seed)
      throw Error("--seed " + std::to_string(o.seed) + ": " + experiment + " computes on " + name +
                  ", recorded with SynthInit seed " + std::to_string(seed) + "; leave --seed out or give " +
                  std::to_string(seed));
    if (first && o.seed != seed)
      throw Error(file.string() + ": recorded with SynthInit seed " + std::to_string(seed) + " but " + *first +
                  " with seed " + std::to_string(o.seed) + "; " + experiment + " needs one seed");
    o.seed = seed;
    first = name;
  }
}

}  // namespace

void settle_probes(Options& o) {
  settle_on_recordings(o, "probes", "ltx2-22b", "ltx25", {recording_of("audio-ff-up"), recording_of("audio-self-attn")});
}

void settle_projection_oracle(Options& o) {
  settle_on_recordings(o, "projection-oracle", "ltx2-22b", "ltx25", {recording_of("video-q-proj")});
}

void settle_block_controls(Options& o) {
  // The recorded blocks: block_small (profile ltx25), block_small_alt (ltx2), the full-size first
  // block (ltx25). Without --model the small block runs.
  const std::string model = o.model_given ? o.model : "small";
  if (model == "ltx2-22b" && o.profile == "ltx25") {
    settle_on_recordings(o, "block-controls", model, o.profile,
                         {recording_of("block-full"), recording_of("block-full", true)});
  } else if (model == "small") {
    settle_on_recordings(o, "block-controls", model, o.profile,
                         {recording_of(o.profile == "ltx2" ? "block-small-alt" : "block-small")});
  } else {
    throw Error("--model " + o.model + " --profile " + o.profile +
                ": block-controls has no recorded block of that config (recorded: small with ltx25 or ltx2, "
                "ltx2-22b with ltx25)");
  }
}

void settle_one_token(Options& o) {
  // The recorded trajectory is the tiny ltx25 model's on SynthInit weights: when one-token
  // compares with it, it computes with the recording's seed (experiments/one_token.cpp).
  const probes::TrajectoryRecording& recorded = probes::trajectory_recording(1);
  const fs::path file = reference_dir(o) / recorded.file;
  if (o.seed_given || o.model != "tiny" || o.profile != "ltx25" || !o.checkpoint.empty() || !fs::exists(file)) return;
  try {
    o.seed = probes::Recording(file, recorded.group).seed();
  } catch (const Error&) {
    // Unreadable: one-token names it when it reads the recording.
  }
}

}  // namespace psi::exp
