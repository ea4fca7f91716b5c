// The settle rules' shared part: refusing what a computation on recordings cannot honour.
#include "experiments/settle.h"

#include <filesystem>
#include <optional>

#include "engine/error.h"
#include "probes/probe_cases.h"
#include "probes/recording.h"

namespace psi::exp {

namespace {

std::string file_list(const std::vector<Recorded>& files) {
  std::string out;
  for (const auto& f : files) out += (out.empty() ? "" : ", ") + f.file;
  return out;
}

}  // namespace

Recorded recording_of(std::string_view probe_case, bool flash) {
  const probes::ProbeCase& c = probes::probe_case(probe_case);
  return {flash ? c.flash_default_file : c.default_file, c.group};
}

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
    const std::filesystem::path file = reference_dir(o) / name;
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

}  // namespace psi::exp
