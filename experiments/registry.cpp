#include "experiments/drivers.h"

namespace psi::exp {

// Each entry names the fields it has; the others keep their defaults (no figures, no settle, no
// options of its own), which is what -Wmissing-field-initializers would flag.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

// In the order of the study's tables; the names are the user interface.
const std::vector<Experiment>& experiments() {
  static const std::vector<Experiment> all = {
      {.name = "memory-scopes",
       .reproduces = "Fig. 2, §IV-A",
       .summary = "managed arena, pages, scratch and workspace high-water, managed peak vs bound and process peak per stage",
       .run = run_memory_scopes,
       .tabulate = tabulate_memory_scopes,
       .figures = figures_memory_scopes},
      {.name = "full-prompt",
       .reproduces = "Table II, Fig. 3",
       .summary = "nine-case cohort (3 prompts x 3 request seeds, 1,024-row contexts): dense, official-h200, baseline and "
                  "modified PSI; invocation wall and endpoint relative L2 with Δ = modified − baseline",
       .run = run_full_prompt,
       .tabulate = tabulate_full_prompt,
       .shardable = true,
       .figures = figures_full_prompt,
       .options = {{.flag = "--zero-mask",
                    .help = "full-prompt: pass an explicit all-zero context mask through the FLASH mask-elision check",
                    .takes_value = false,
                    .apply = [](const std::string&, Options& o) { o.full_prompt.zero_mask = true; }}}},
      {.name = "one-token",
       .reproduces = "Table III",
       .summary = "one-token 8+3 replay: invocation wall and per-state relative L2 of dense, official-h200, baseline and "
                  "modified PSI to the recorded official trajectory, and every path's distance to the float64 trajectory",
       .run = run_one_token,
       .tabulate = tabulate_one_token,
       .settle = settle_one_token},
      {.name = "scheduling",
       .reproduces = "Table IV",
       .summary = "four PSI schedules on the first block: wall mean ± SD over rotated cycles, bitwise check of the ten "
                  "probes in every run, bytes moved and blocking synchronizations",
       .run = run_scheduling,
       .tabulate = tabulate_scheduling,
       .options = {{.flag = "--row-tile",
                    .help = "scheduling: token rows per row tile (a multiple of the 128-key tile), or 'fit': the "
                            "largest whose live set fits the arena under every schedule (fewer weight passes); "
                            "default: the config's",
                    .apply = set_row_tile}}},
      {.name = "capacity",
       .reproduces = "Table V",
       .summary = "first block at six arena/page settings: outcome, wall, peak vs bound, bitwise equality to the "
                  "reference setting",
       .run = run_capacity,
       .tabulate = tabulate_capacity,
       .shardable = true},
      {.name = "block-controls",
       .reproduces = "Table VI",
       .summary = "dense, official-h200, official-h200-flash, baseline and modified PSI vs the recorded official MATH "
                  "and FLASH block on identical frozen inputs, and why FLASH and MATH differ, element by element",
       .run = run_block_controls,
       .tabulate = tabulate_block_controls,
       .figures = figures_block_controls,
       .settle = settle_block_controls},
      {.name = "fixed-budget",
       .reproduces = "Table VII",
       .summary = "a complete 8+3 run under a fixed memory cap: success, wall, peak, states bitwise equal to the "
                  "uncapped run",
       .run = run_fixed_budget,
       .tabulate = tabulate_fixed_budget,
       .options = {{.flag = "--pool",
                    .help = "fixed-budget: the free device memory a reservation leaves for the run on CUDA (default "
                            "3GiB; units bytes, KiB, MiB, GiB); on the CPU backend the cap on arena + pinned buffers, "
                            "scaled with the model",
                    .apply = set_pool}}},
      {.name = "transport-control",
       .reproduces = "§IV-C",
       .summary = "the 8+3 run under the four PSI schedules (recompute, FFN reuse, reuse + async journal, reuse + "
                  "prefetch): all saved states bitwise equal to the same run on the host block (CPU backend)",
       .run = run_transport_control,
       .tabulate = tabulate_transport_control},
      {.name = "probes",
       .reproduces = "§IV-B",
       .summary = "operator probes (audio FFN up bias, 64-dim attention, Q projection) of each variant against the "
                  "recordings",
       .run = run_probes,
       .tabulate = tabulate_probes,
       .shardable = true,
       .settle = settle_probes},
      {.name = "projection-oracle",
       .reproduces = "eq. (6)",
       .summary = "first element where baseline PSI and the official video Q projection disagree, explained exactly",
       .run = run_projection_oracle,
       .tabulate = tabulate_projection_oracle,
       .settle = settle_projection_oracle},
  };
  return all;
}

}  // namespace psi::exp
