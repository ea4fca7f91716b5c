#include "experiments/drivers.h"

namespace psi::exp {

const std::vector<Experiment>& experiments() {
  static const std::vector<Experiment> all = {
      {"one-token", "Table III",
       "one-token 8+3 replay: invocation wall and per-state relative L2 of dense, baseline and modified PSI "
       "to the recorded official trajectory",
       run_one_token, tabulate_one_token, false},
      {"full-prompt", "Table II, Fig. 3",
       "nine-case cohort (3 prompts x 3 request seeds, 1,024-row contexts): dense, baseline and modified PSI; "
       "invocation wall and endpoint relative L2 with Δ = modified − baseline",
       run_full_prompt, tabulate_full_prompt, true, figures_full_prompt},
      {"block-controls", "Table VI",
       "dense, baseline and modified PSI vs the recorded official MATH and FLASH block on identical frozen inputs",
       run_block_controls, tabulate_block_controls, false},
      {"probes", "§IV-B",
       "operator probes (audio FFN up bias, 64-dim attention, Q projection) of each variant against the recordings",
       run_probes, tabulate_probes, true},
      {"projection-oracle", "eq. (6)",
       "first element where baseline PSI and the official video Q projection disagree, explained exactly",
       run_projection_oracle, tabulate_projection_oracle, false},
  };
  return all;
}

}  // namespace psi::exp
