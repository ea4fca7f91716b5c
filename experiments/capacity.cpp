// capacity (Table V): the first block at six arena/page settings (the paper's 48/64/80/96 MiB
// arenas with 8 MiB pages, 80 with 4 and 96 with 16 for ltx2-22b; scaled for smaller configs):
// the outcome (complete / scratch exhausted / weight tile exceeds page), the wall, the managed
// peak against its bound, and bitwise equality of every completed run to the reference
// setting (the default 80 MiB / 8 MiB arena).
#include "experiments/drivers.h"

#include "engine/interrupt.h"
#include "engine/model/variant.h"
#include "engine/progress.h"
#include "engine/psi/executor.h"
#include "engine/runtime/run_report.h"
#include "experiments/block_support.h"
#include "experiments/gpu_memory_cells.h"

namespace psi::exp {

void run_capacity(const Options& o, Report& report) {
  const FirstBlock fb = first_block(o);
  const model::NumericsVariant& variant = model::numerics_variant(kRuntimeVariant);
  const exec::Schedule& sched = exec::schedule("reuse+prefetch");
  exec::ExecOptions eo;
  eo.backend = o.backend;
  if (o.chaos_seed) eo.chaos_seed = o.chaos_seed;
  eo.resident_weights = o.backend == "cuda";  // as in scheduling: the block's time without the weight source
  const exec::BlockRun ref = exec::run_block(fb.config, *fb.weights, 0, fb.inputs, variant, sched,
                                             exec::default_arena(fb.config), eo);
  if (ref.outcome != rt::Outcome::complete)
    throw Error("capacity: the reference setting " + exec::default_arena(fb.config).label + " failed: " + ref.failure,
                Exit::run_failed);
  const auto ref_hashes = probe_hashes(ref.probes);
  const auto settings = exec::capacity_settings(fb.config);
  Progress progress("capacity", long(settings.size()));
  for (std::size_t i = 0; i < settings.size(); ++i) {
    if (!o.in_shard(std::int64_t(i))) continue;
    check_interrupt("capacity setting " + settings[i].label);
    const exec::BlockRun run = exec::run_block(fb.config, *fb.weights, 0, fb.inputs, variant, sched, settings[i], eo);
    progress.step(settings[i].label);
    nlohmann::json rec{{"setting", settings[i].label},
                       {"arena_bytes", settings[i].arena},
                       {"page_bytes", settings[i].page},
                       {"workspace_bytes", settings[i].workspace},
                       {"outcome", std::string(rt::outcome_name(run.outcome))},
                       {"failure", run.failure},
                       {"wall_s", run.wall_seconds},
                       {"block_s", run.block_seconds},
                       {"weights", eo.resident_weights ? "host-resident" : "staged"},
                       {"schedule", sched.name},
                       {"inputs", fb.description},
                       {"reference", exec::default_arena(fb.config).label}};
    if (run.outcome == rt::Outcome::complete) {
      rec["run"] = rt::to_json(run.report);
      rec["bitwise_equal_to_reference"] = probe_hashes(run.probes) == ref_hashes;
    }
    report.add_case(std::int64_t(i), std::move(rec));
  }
}

std::vector<Table> tabulate_capacity(const nlohmann::json& cases, const nlohmann::json& options) {
  Table t;
  t.title = "first block at six arena / page settings (Table V) — model " + options.value("model", std::string("?"));
  t.columns = {"arena / page", "outcome", "wall (ms)", "managed peak / bound", "scratch high-water",
               "bitwise equal to reference"};
  nlohmann::json runs = nlohmann::json::array();
  for (auto& c : cases)
    if (c.contains("run")) runs.push_back(c["run"]);
  const bool gpu = any_gpu_memory(runs);
  if (gpu) t.columns.insert(t.columns.end(), {"GPU process peak (NVML)", "device used peak (NVML)"});
  std::string ref, inputs;
  for (auto& c : cases) {
    ref = c["reference"];
    inputs = c["inputs"];
    if (c["outcome"] == "complete") {
      const auto& r = c["run"];
      std::vector<std::string> row{c["setting"], "complete", fmt_fixed(c["wall_s"].get<double>() * 1e3, 1),
                                   fmt_mib(r["managed_peak_bytes"]) + " / " + fmt_mib(r["bound_bytes"]),
                                   fmt_mib(r["scratch_high_water_bytes"]),
                                   c["bitwise_equal_to_reference"].get<bool>() ? "yes" : "NO"};
      if (gpu) {
        row.insert(row.end(), {gpu_process_peak_cell(r), gpu_device_peak_cell(r)});
        t.notes.push_back(c["setting"].get<std::string>() + ": " + gpu_memory_note(r));
      }
      t.add_row(std::move(row));
    } else {
      std::vector<std::string> row{c["setting"], c["outcome"], "-", "-", "-", "-"};
      if (gpu) row.insert(row.end(), {"-", "-"});
      t.add_row(std::move(row));
      t.notes.push_back(c["setting"].get<std::string>() + ": " + c["failure"].get<std::string>());
    }
  }
  t.notes.insert(t.notes.begin(), "reference setting " + ref + "; inputs: " + inputs + "; variant " + kRuntimeVariant +
                                      ", schedule reuse+prefetch.");
  return {t};
}

}  // namespace psi::exp
