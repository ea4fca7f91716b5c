// capacity (Table V): the first block at six arena/page settings (the paper's 48/64/80/96 MiB
// arenas with 8 MiB pages, 80 with 4 and 96 with 16 for ltx2-22b; scaled for smaller configs):
// the outcome (complete / scratch exhausted / weight tile exceeds page), the scratch the block
// needs against the scratch each setting leaves, the scratch high-water mark, the wall, the managed
// peak against its bound, and bitwise equality of every completed run to the reference setting
// (the default 80 MiB / 8 MiB arena); then the smallest page and arenas that complete, from the
// block's plan (docs/experiments.md explains why psi's construction does not fail at the paper's
// 64 MiB).
#include "experiments/device_summary.h"
#include "experiments/experiment.h"
#include "experiments/report.h"

#include <set>

#include "engine/exec/executor.h"
#include "engine/interrupt.h"
#include "engine/measure/sizes.h"
#include "engine/model/variant.h"
#include "engine/progress.h"
#include "engine/runtime/run_report.h"
#include "experiments/block_support.h"
#include "experiments/gpu_memory_cells.h"
#include "experiments/paper_line.h"

namespace psi::exp {

// The first block at one arena / page setting.
struct CapacityCase {
  std::string setting;
  std::int64_t arena_bytes = 0, page_bytes = 0, workspace_bytes = 0;
  std::string outcome, failure;
  double wall_s = 0, block_s = 0;
  std::string weights, schedule, inputs, reference;
  // A complete run's report and its probes' equality to the reference setting's.
  std::optional<nlohmann::json> run;
  std::optional<bool> bitwise_equal_to_reference;
  // The block's plan, the same at every setting: the scratch it needs (S_live, and the allocation
  // that reaches it), its workspace high water and its largest weight tile; absent in reports
  // before them.
  struct Need {
    std::uint64_t scratch_bytes = 0, workspace_bytes = 0, largest_tile_bytes = 0;
    std::string scratch_at, largest_tile;
    static auto fields() {
      using R = Need;
      return std::tuple{field("scratch_need_bytes", &R::scratch_bytes), field("scratch_need_at", &R::scratch_at),
                        field("workspace_need_bytes", &R::workspace_bytes),
                        field("largest_tile_bytes", &R::largest_tile_bytes), field("largest_tile", &R::largest_tile)};
    }
  };
  std::optional<Need> need;
  // The table shows a complete run's wall, run and verdict, and another's failure.
  static bool complete(const CapacityCase& r) { return r.outcome == "complete"; }
  static bool failed(const CapacityCase& r) { return !complete(r); }
  static auto fields() {
    using R = CapacityCase;
    return std::tuple{field("setting", &R::setting),
                      field_if_present("arena_bytes", &R::arena_bytes),
                      field_if_present("page_bytes", &R::page_bytes),
                      field_if_present("workspace_bytes", &R::workspace_bytes),
                      field("outcome", &R::outcome),
                      field_if_present("failure", &R::failure).when(failed),
                      field_if_present("wall_s", &R::wall_s).when(complete).measures_time(),
                      field_if_present("block_s", &R::block_s).measures_time(),
                      field_if_present("weights", &R::weights),
                      field_if_present("schedule", &R::schedule),
                      field("inputs", &R::inputs),
                      field("reference", &R::reference),
                      field_optional("run", &R::run).when(complete),
                      field_optional("bitwise_equal_to_reference", &R::bitwise_equal_to_reference).when(complete),
                      fields_flat(&R::need)};
  }
};

void run_capacity(const Options& o, Report& report) {
  const FirstBlock fb = first_block(o);
  const model::NumericsVariant variant = variant_of(o, kRuntimeVariant);
  const exec::Schedule& sched = exec::schedule("reuse+prefetch");
  exec::ExecOptions eo;
  eo.backend = rt::backend_name(o.backend);
  if (o.chaos_seed) eo.chaos_seed = o.chaos_seed;
  eo.resident_weights = rt::backend_traits(o.backend).resident_weights;  // as in scheduling: the block's time without the weight source
  const exec::BlockRun ref = exec::run_block(fb.config, *fb.weights, 0, fb.inputs, variant, sched,
                                             exec::default_arena(fb.config), eo);
  if (ref.outcome != rt::Outcome::complete)
    throw Error("capacity: the reference setting " + exec::default_arena(fb.config).label + " failed: " + ref.failure,
                Exit::run_failed);
  const auto ref_hashes = probe_hashes(ref.probes);
  CapacityCase::Need need{ref.plan.scratch_bytes, ref.plan.workspace_bytes, 0, ref.plan.scratch_peak_at, ""};
  for (const rt::WeightSlice& w : ref.plan.tiles)
    if (w.bytes() > need.largest_tile_bytes) {
      need.largest_tile_bytes = w.bytes();
      need.largest_tile = w.op + " tile " + std::to_string(w.tile);
    }
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
    rec.need = need;
    if (run.outcome == rt::Outcome::complete) {
      rec.run = rt::to_json(run.report);
      rec.bitwise_equal_to_reference = probe_hashes(run.probes) == ref_hashes;
    }
    report.add_case(std::int64_t(i), rec);
  }
}

namespace {

// A setting's scratch: what the arena leaves after its two pages and the workspace
// (rt::ArenaLayout).
std::uint64_t scratch_of(const CapacityCase& c) {
  return std::uint64_t(c.arena_bytes - 2 * c.page_bytes - c.workspace_bytes);
}

std::string capacity(std::uint64_t bytes) { return rt::format_capacity(bytes); }
// An arena to the byte, "1,803,520 bytes (1.7 MiB)": the edge, not a rounded figure.
std::string edge(std::uint64_t bytes) { return fmt_count((long long)bytes) + " bytes (" + fmt_mib(double(bytes)) + ")"; }

// The smallest settings that complete, from the plan: a page must hold the largest weight tile,
// and at page P the arena must leave the scratch the block needs, 2P + workspace + S_live.
std::vector<std::string> smallest_lines(const std::vector<CapacityCase>& cases, const CapacityCase::Need& need) {
  const std::uint64_t workspace = std::uint64_t(cases.front().workspace_bytes);
  std::vector<std::string> lines;
  const std::uint64_t page = rt::align_up(need.largest_tile_bytes);
  lines.push_back("smallest page that completes: " + capacity(page) + ", the largest weight tile (" + need.largest_tile +
                  "); with it the smallest arena is " + edge(2 * page + workspace + need.scratch_bytes) + ".");
  std::set<std::int64_t> pages;
  for (const CapacityCase& c : cases) pages.insert(c.page_bytes);
  std::string at;
  for (std::int64_t p : pages)
    at += (at.empty() ? "" : "; ") + capacity(std::uint64_t(p)) + " pages: " +
          (std::uint64_t(p) < need.largest_tile_bytes ? std::string("none (the largest weight tile does not fit)")
                                                      : edge(2 * std::uint64_t(p) + workspace + need.scratch_bytes));
  lines.push_back("smallest arena that completes (2 × page + workspace " + capacity(workspace) + " + S_live), at the "
                  "table's page sizes: " + at + ".");
  return lines;
}

}  // namespace

std::vector<Table> tabulate_capacity(const nlohmann::json& case_records, const nlohmann::json& options) {
  const auto cases = case_records.get<std::vector<CapacityCase>>();
  Table t;
  t.title = "first block at six arena / page settings (Table V) — model " + recorded_model(options);
  t.columns = {"arena / page", "outcome", "scratch needed / available", "scratch high-water", "wall (ms)",
               "managed peak / bound", "bitwise equal to reference"};
  t.time_columns = {"wall (ms)"};
  nlohmann::json runs = nlohmann::json::array();
  for (const CapacityCase& c : cases)
    if (c.run) runs.push_back(*c.run);
  const bool gpu = any_gpu_memory(runs);
  if (gpu) t.columns.insert(t.columns.end(), {"GPU process peak (NVML)", "device used peak (NVML)"});
  std::string ref, inputs;
  std::optional<CapacityCase::Need> need;
  for (const CapacityCase& c : cases) {
    ref = c.reference;
    inputs = c.inputs;
    if (c.need) need = c.need;
    const std::string scratch = (c.need ? fmt_mib(double(c.need->scratch_bytes)) : std::string("-")) + " / " +
                                fmt_mib(double(scratch_of(c)));
    if (c.outcome == "complete") {
      const auto& r = *c.run;
      std::vector<std::string> row{c.setting, "complete", scratch, fmt_mib(r["scratch_high_water_bytes"]),
                                   fmt_fixed(c.wall_s * 1e3, 1),
                                   fmt_mib(r["managed_peak_bytes"]) + " / " + fmt_mib(r["bound_bytes"]),
                                   *c.bitwise_equal_to_reference ? "yes" : "NO"};
      if (gpu) {
        row.insert(row.end(), {gpu_process_peak_cell(r), gpu_device_peak_cell(r)});
        t.notes.push_back(c.setting + ": " + gpu_memory_note(r));
      }
      t.add_row(std::move(row));
    } else {
      std::vector<std::string> row{c.setting, c.outcome, scratch, "-", "-", "-", "-"};
      if (gpu) row.insert(row.end(), {"-", "-"});
      t.add_row(std::move(row));
      t.notes.push_back(c.setting + ": " + c.failure);
    }
  }
  t.notes.insert(t.notes.begin(), "reference setting " + ref + "; inputs: " + inputs + "; variant " + kRuntimeVariant +
                                      ", schedule reuse+prefetch.");
  if (need && !cases.empty()) {
    t.notes.push_back("scratch needed: the block's S_live, " + fmt_mib(double(need->scratch_bytes)) + " (" +
                      fmt_count((long long)need->scratch_bytes) + " bytes, reached at " + need->scratch_at +
                      "), the same at every setting; available: arena − 2 × page − workspace.");
    for (std::string& line : smallest_lines(cases, *need)) t.notes.push_back(std::move(line));
  }
  t.notes.push_back(paper_note("Table V, LTX-2 22B: the 48 and 64 MiB arenas with 8 MiB pages exhaust scratch; the "
                               "other settings' outcomes are in the paper's Table V. psi's ltx2-22b plan needs 32.06 "
                               "MiB of scratch, so 64 MiB (40 MiB of scratch) completes: docs/experiments.md, \"Why psi "
                               "does not fail at the paper's 64 MiB\"",
                               options));
  return {t};
}

namespace {

// The device check's section: each setting's outcome, wall, managed peak and bitwise verdict.
std::string capacity_device_summary(const DeviceSummaryInput& in) {
  Table t;
  t.columns = {"arena / page", "outcome", "wall (ms)", "managed peak / bound", "scratch high water",
               "bitwise equal to the reference setting"};
  t.time_columns = {"wall (ms)"};
  std::string ref;
  for (const CapacityCase& c : in.cases.get<std::vector<CapacityCase>>()) {
    ref = c.reference;
    if (c.outcome == "complete" && c.run)
      t.add_row({c.setting, "complete", ms(c.wall_s, 1), bytes_pair(*c.run, "managed_peak_bytes", "bound_bytes"),
                 amount(num(*c.run, "scratch_high_water_bytes")),
                 c.bitwise_equal_to_reference.value_or(false) ? "yes" : "NO"});
    else
      t.add_row({c.setting, c.outcome, "-", "-", "-", "-"});
  }
  return md_table(t) + "\n- reference setting: " + ref + "\n\n";
}

}  // namespace

const Registration capacity_registration{5, {
    .name = "capacity",
    .reproduces = "Table V",
    .summary = "first block at six arena/page settings: outcome, wall, peak vs bound, bitwise equality to the "
               "reference setting",
    .run = run_capacity,
    .tabulate = tabulate_capacity,
    .shardable = true,
    .reread = reread_as<CapacityCase>,
    .time_fields = time_keys_of<CapacityCase>,
    .provenance_fields = provenance_keys_of<CapacityCase>,
    .device_summary = capacity_device_summary}};

}  // namespace psi::exp
