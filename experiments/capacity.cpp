// capacity (Table V): the first block at six arena/page settings (the paper's 48/64/80/96 MiB
// arenas with 8 MiB pages, 80 with 4 and 96 with 16 for ltx2-22b; scaled for smaller configs):
// the outcome (complete / scratch exhausted / weight tile exceeds page), the wall, the managed
// peak against its bound, and bitwise equality of every completed run to the reference
// setting (the default 80 MiB / 8 MiB arena).
#include "experiments/drivers.h"

#include "engine/exec/executor.h"
#include "engine/interrupt.h"
#include "engine/model/variant.h"
#include "engine/progress.h"
#include "engine/runtime/run_report.h"
#include "experiments/block_support.h"
#include "experiments/gpu_memory_cells.h"

namespace psi::exp {

void to_json(nlohmann::json& j, const CapacityCase& r) {
  j = {{"setting", r.setting},
       {"arena_bytes", r.arena_bytes},
       {"page_bytes", r.page_bytes},
       {"workspace_bytes", r.workspace_bytes},
       {"outcome", r.outcome},
       {"failure", r.failure},
       {"wall_s", r.wall_s},
       {"block_s", r.block_s},
       {"weights", r.weights},
       {"schedule", r.schedule},
       {"inputs", r.inputs},
       {"reference", r.reference}};
  if (r.run) j["run"] = *r.run;
  if (r.bitwise_equal_to_reference) j["bitwise_equal_to_reference"] = *r.bitwise_equal_to_reference;
}

void from_json(const nlohmann::json& j, CapacityCase& r) {
  j.at("setting").get_to(r.setting);
  j.at("outcome").get_to(r.outcome);
  j.at("inputs").get_to(r.inputs);
  j.at("reference").get_to(r.reference);
  read_if_present(j, "arena_bytes", r.arena_bytes);
  read_if_present(j, "page_bytes", r.page_bytes);
  read_if_present(j, "workspace_bytes", r.workspace_bytes);
  read_if_present(j, "block_s", r.block_s);
  read_if_present(j, "weights", r.weights);
  read_if_present(j, "schedule", r.schedule);
  read_if_present(j, "wall_s", r.wall_s);
  read_if_present(j, "failure", r.failure);
  read_optional(j, "run", r.run);
  read_optional(j, "bitwise_equal_to_reference", r.bitwise_equal_to_reference);
  // The table shows a complete run's wall, run and verdict, and another's failure.
  if (r.outcome == "complete") {
    j.at("wall_s").get_to(r.wall_s);
    r.run = j.at("run");
    r.bitwise_equal_to_reference = j.at("bitwise_equal_to_reference").get<bool>();
  } else {
    j.at("failure").get_to(r.failure);
  }
}

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
    CapacityCase rec;
    rec.setting = settings[i].label;
    rec.arena_bytes = settings[i].arena;
    rec.page_bytes = settings[i].page;
    rec.workspace_bytes = settings[i].workspace;
    rec.outcome = rt::outcome_name(run.outcome);
    rec.failure = run.failure;
    rec.wall_s = run.wall_seconds;
    rec.block_s = run.block_seconds;
    rec.weights = eo.resident_weights ? "host-resident" : "staged";
    rec.schedule = sched.name;
    rec.inputs = fb.description;
    rec.reference = exec::default_arena(fb.config).label;
    if (run.outcome == rt::Outcome::complete) {
      rec.run = rt::to_json(run.report);
      rec.bitwise_equal_to_reference = probe_hashes(run.probes) == ref_hashes;
    }
    report.add_case(std::int64_t(i), rec);
  }
}

std::vector<Table> tabulate_capacity(const nlohmann::json& case_records, const nlohmann::json& options) {
  const auto cases = case_records.get<std::vector<CapacityCase>>();
  Table t;
  t.title = "first block at six arena / page settings (Table V) — model " + recorded_model(options);
  t.columns = {"arena / page", "outcome", "wall (ms)", "managed peak / bound", "scratch high-water",
               "bitwise equal to reference"};
  nlohmann::json runs = nlohmann::json::array();
  for (const CapacityCase& c : cases)
    if (c.run) runs.push_back(*c.run);
  const bool gpu = any_gpu_memory(runs);
  if (gpu) t.columns.insert(t.columns.end(), {"GPU process peak (NVML)", "device used peak (NVML)"});
  std::string ref, inputs;
  for (const CapacityCase& c : cases) {
    ref = c.reference;
    inputs = c.inputs;
    if (c.outcome == "complete") {
      const auto& r = *c.run;
      std::vector<std::string> row{c.setting, "complete", fmt_fixed(c.wall_s * 1e3, 1),
                                   fmt_mib(r["managed_peak_bytes"]) + " / " + fmt_mib(r["bound_bytes"]),
                                   fmt_mib(r["scratch_high_water_bytes"]), *c.bitwise_equal_to_reference ? "yes" : "NO"};
      if (gpu) {
        row.insert(row.end(), {gpu_process_peak_cell(r), gpu_device_peak_cell(r)});
        t.notes.push_back(c.setting + ": " + gpu_memory_note(r));
      }
      t.add_row(std::move(row));
    } else {
      std::vector<std::string> row{c.setting, c.outcome, "-", "-", "-", "-"};
      if (gpu) row.insert(row.end(), {"-", "-"});
      t.add_row(std::move(row));
      t.notes.push_back(c.setting + ": " + c.failure);
    }
  }
  t.notes.insert(t.notes.begin(), "reference setting " + ref + "; inputs: " + inputs + "; variant " + kRuntimeVariant +
                                      ", schedule reuse+prefetch.");
  return {t};
}

}  // namespace psi::exp
