#include "experiments/drivers.h"

namespace psi::exp {

// In the order of the study's tables; the names are the user interface.
const std::vector<Experiment>& experiments() {
  static const std::vector<Experiment> all = {
      {"memory-scopes", "Fig. 2, §IV-A",
       "managed arena, pages, scratch and workspace high-water, managed peak vs bound and process peak per stage",
       run_memory_scopes, tabulate_memory_scopes, false, figures_memory_scopes},
      {"full-prompt", "Table II, Fig. 3",
       "nine-case cohort (3 prompts x 3 request seeds, 1,024-row contexts): dense, official-h200, baseline and modified PSI; "
       "invocation wall and endpoint relative L2 with Δ = modified − baseline",
       run_full_prompt, tabulate_full_prompt, true, figures_full_prompt},
      {"one-token", "Table III",
       "one-token 8+3 replay: invocation wall and per-state relative L2 of dense, official-h200, baseline and modified PSI "
       "to the recorded official trajectory, and every path's distance to the float64 trajectory",
       run_one_token, tabulate_one_token, false, {}, settle_one_token},
      {"scheduling", "Table IV",
       "four PSI schedules on the first block: wall mean ± SD over rotated cycles, bitwise check of the ten "
       "probes in every run, bytes moved and blocking synchronizations",
       run_scheduling, tabulate_scheduling, false, {}},
      {"capacity", "Table V",
       "first block at six arena/page settings: outcome, wall, peak vs bound, bitwise equality to the reference setting",
       run_capacity, tabulate_capacity, true, {}},
      {"block-controls", "Table VI",
       "dense, official-h200, baseline and modified PSI vs the recorded official MATH and FLASH block on identical frozen inputs",
       run_block_controls, tabulate_block_controls, false, {}, settle_block_controls},
      {"fixed-budget", "Table VII",
       "a complete 8+3 run under a fixed memory cap: success, wall, peak, states bitwise equal to the uncapped run",
       run_fixed_budget, tabulate_fixed_budget, false, {}},
      {"transport-control", "§IV-C",
       "the 8+3 run under the four PSI schedules (recompute, FFN reuse, reuse + async journal, reuse + prefetch): "
       "all saved states bitwise equal",
       run_transport_control, tabulate_transport_control, false, {}},
      {"probes", "§IV-B",
       "operator probes (audio FFN up bias, 64-dim attention, Q projection) of each variant against the recordings",
       run_probes, tabulate_probes, true, {}, settle_probes},
      {"projection-oracle", "eq. (6)",
       "first element where baseline PSI and the official video Q projection disagree, explained exactly",
       run_projection_oracle, tabulate_projection_oracle, false, {}, settle_projection_oracle},
  };
  return all;
}

}  // namespace psi::exp
