#include "experiments/paper_line.h"

#include "experiments/experiment.h"

namespace psi::exp {

std::string paper_note(const std::string& paper, const nlohmann::json& options) {
  const std::string checkpoint = options.value("checkpoint", std::string());
  return "paper (" + paper + "); here: model " + recorded_model(options) + " (" +
         options.value("profile", std::string("?")) + "), " +
         (checkpoint.empty() ? std::string("SynthInit weights") : "checkpoint " + checkpoint) + ", " +
         options.value("backend", std::string("?")) + " backend.";
}

}  // namespace psi::exp
