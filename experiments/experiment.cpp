#include "experiments/experiment.h"

#include <cstdlib>

#include "engine/error.h"
#include "psi_version.h"

namespace psi::exp {

nlohmann::json Options::to_json() const {
  return {{"model", model},
          {"profile", profile},
          {"backend", backend},
          {"seed", seed},
          {"checkpoint", checkpoint},
          {"shard_index", shard_index},
          {"shard_count", shard_count},
          {"quick", quick},
          {"chaos_seed", chaos_seed}};
}

const Experiment& find_experiment(std::string_view name) {
  for (const Experiment& e : experiments())
    if (e.name == name) return e;
  std::string valid;
  for (const Experiment& e : experiments()) valid += (valid.empty() ? "" : ", ") + e.name;
  throw Error("unknown experiment '" + std::string(name) + "' (valid: " + valid + ")");
}

std::filesystem::path shared_dir() {
  if (const char* s = std::getenv("PSI_SHARED"); s && *s) return s;
  return PSI_SHARED_DIR_DEFAULT;
}

std::filesystem::path reference_dir(const Options& o) {
  return o.reference_dir.empty() ? shared_dir() / "reference" : o.reference_dir;
}

}  // namespace psi::exp
