// scheduling (Table IV): the four PSI schedules (baseline, FFN reuse, reuse + async journal,
// reuse + prefetch) on the first block in the default arena; one warm-up cycle, then five
// measured cycles with the order rotated each cycle; wall mean and sample SD; every run's ten
// probes checked bitwise against the first run and against the host block; bytes moved and
// blocking synchronizations per schedule.
#include "experiments/drivers.h"

#include <chrono>
#include <cmath>
#include <limits>

#include "engine/error.h"
#include "engine/exec/executor.h"
#include "engine/exec/tiling.h"
#include "engine/interrupt.h"
#include "engine/model/block_catalogue.h"
#include "engine/model/variant.h"
#include "engine/progress.h"
#include "engine/runtime/run_report.h"
#include "engine/whole_number.h"
#include "experiments/block_support.h"
#include "experiments/gpu_memory_cells.h"
#include "report/stats.h"

namespace psi::exp {

namespace {
constexpr int kProbes = int(model::kProbeCount);  // the probe hashes each run is compared on
}  // namespace

void to_json(nlohmann::json& j, const SchedulingCase& r) {
  j = {{"schedule", r.schedule},
       {"cycle", r.cycle},
       {"warmup", r.warmup},
       {"arena", r.arena},
       {"outcome", r.outcome},
       {"failure", r.failure},
       {"wall_s", r.wall_s},
       {"preload_s", r.preload_s},
       {"weight_bytes_streamed", r.weight_bytes_streamed},
       {"run", r.run},
       {"inputs", r.inputs}};
  if (r.row_tile) j["row_tile"] = *r.row_tile;
  if (r.block_s) j["block_s"] = *r.block_s;
  if (r.weights) j["weights"] = *r.weights;
  if (r.probe_sha256) j["probe_sha256"] = *r.probe_sha256;
  if (r.probes_equal_first) j["probes_equal_first"] = *r.probes_equal_first;
  if (r.probes_equal_host) j["probes_equal_host"] = *r.probes_equal_host;
}

void from_json(const nlohmann::json& j, SchedulingCase& r) {
  j.at("schedule").get_to(r.schedule);
  j.at("warmup").get_to(r.warmup);
  j.at("arena").get_to(r.arena);
  j.at("outcome").get_to(r.outcome);
  j.at("wall_s").get_to(r.wall_s);
  r.run = j.at("run");
  j.at("inputs").get_to(r.inputs);
  read_if_present(j, "cycle", r.cycle);
  read_if_present(j, "failure", r.failure);
  read_if_present(j, "preload_s", r.preload_s);
  read_if_present(j, "weight_bytes_streamed", r.weight_bytes_streamed);
  read_optional(j, "row_tile", r.row_tile);
  read_optional(j, "block_s", r.block_s);
  read_optional(j, "weights", r.weights);
  if (r.outcome == "complete")  // the tables compare every complete run's probes
    r.probe_sha256 = j.at("probe_sha256").get<std::map<std::string, std::string>>();
  else
    read_optional(j, "probe_sha256", r.probe_sha256);
  read_optional(j, "probes_equal_first", r.probes_equal_first);
  read_optional(j, "probes_equal_host", r.probes_equal_host);
}

void set_row_tile(const std::string& value, Options& o) {
  if (value == "fit") {
    o.scheduling.row_tile = -1;
    return;
  }
  const auto v = parse_whole(value, 1, std::uint64_t(std::numeric_limits<std::int64_t>::max()));
  if (!v) throw Error("--row-tile '" + value + "': expected a positive number of rows or 'fit'");
  if (*v % exec::kRowTileGranule != 0)
    throw Error("--row-tile " + value + ": not a multiple of " + std::to_string(exec::kRowTileGranule) +
                " rows (the row-tile granule; e.g. " + std::to_string(std::max<std::uint64_t>(1, *v / exec::kRowTileGranule) * exec::kRowTileGranule) + ")");
  o.scheduling.row_tile = std::int64_t(*v);
}

void run_scheduling(const Options& o, Report& report) {
  const FirstBlock fb = first_block(o);
  const model::NumericsVariant& variant = model::numerics_variant(kRuntimeVariant);
  const exec::ArenaSettings arena = exec::default_arena(fb.config);
  // On the CPU backend the executor's arithmetic is the host block's, so every run is checked
  // against it too. On CUDA the products are cuBLASLt's (docs/cuda-backend.md): the transport
  // claim is that every schedule and cycle gives the first run's bits.
  const bool host_check = o.backend != "cuda";
  std::map<std::string, std::string> reference;
  if (host_check) {
    model::SynthInitSource host_weights(o.seed);
    reference = probe_hashes(model::block_forward(fb.config, model::load_block_weights(host_weights, fb.config, 0),
                                                  fb.inputs, variant));
  }
  std::map<std::string, std::string> first;

  exec::ExecOptions eo;
  eo.backend = o.backend;
  if (o.chaos_seed) eo.chaos_seed = o.chaos_seed;
  // On a GPU the block's time is what the transfer floor bounds: weights host-resident, so the
  // weight source (SynthInit generation, file reads) is outside it.
  eo.resident_weights = o.backend == "cuda";
  const std::int64_t requested_tile = o.scheduling.row_tile;
  eo.row_tile = requested_tile == -1
                    ? exec::fitting_row_tile(fb.config, variant, exec::schedules(), arena,
                                             exec::block_shapes(fb.config, fb.inputs))
                    : requested_tile;
  const std::int64_t row_tile = eo.row_tile == 0 ? exec::default_row_tile(fb.config) : eo.row_tile;
  // A requested tile taller than every stream only inflates the planned shapes (an absurd one
  // kept psi planning for minutes).
  const exec::BlockShapes shapes = exec::block_shapes(fb.config, fb.inputs);
  const std::int64_t tallest = std::max(shapes.video.tokens, shapes.audio.tokens);
  if (requested_tile > 0 && row_tile > tallest)
    throw Error("--row-tile " + std::to_string(row_tile) + ": more rows than the block's tallest stream has (" +
                std::to_string(tallest) + " tokens)");
  const auto& all = exec::schedules();
  const int cycles = o.quick ? 2 : 5;
  Progress progress("scheduling", long((cycles + 1) * all.size()));
  std::int64_t index = 0;
  for (int cycle = 0; cycle <= cycles; ++cycle)
    for (std::size_t k = 0; k < all.size(); ++k) {
      const exec::Schedule& s = all[(k + std::size_t(cycle)) % all.size()];  // rotate the order
      check_interrupt("scheduling cycle " + std::to_string(cycle) + " " + s.name);
      const exec::BlockRun run = exec::run_block(fb.config, *fb.weights, 0, fb.inputs, variant, s, arena, eo);
      progress.step((cycle == 0 ? std::string("warm-up ") : "cycle " + std::to_string(cycle) + " ") + s.name);
      SchedulingCase rec;
      rec.schedule = s.name;
      rec.cycle = cycle;
      rec.warmup = cycle == 0;
      rec.arena = arena.label;
      rec.row_tile = row_tile;
      rec.outcome = rt::outcome_name(run.outcome);
      rec.failure = run.failure;
      rec.wall_s = run.wall_seconds;
      rec.block_s = run.block_seconds;
      rec.preload_s = run.preload_seconds;
      rec.weights = eo.resident_weights ? "host-resident" : "staged";
      rec.weight_bytes_streamed = run.plan.weight_bytes;
      rec.run = rt::to_json(run.report);
      rec.inputs = fb.description;
      if (run.outcome != rt::Outcome::complete)
        report.fail("scheduling: " + s.name + " did not complete in " + arena.label + ": " + run.failure);
      if (run.outcome == rt::Outcome::complete) {
        const auto h = probe_hashes(run.probes);
        rec.probe_sha256 = h;
        if (first.empty()) first = h;
        const auto equal_to = [&](const std::map<std::string, std::string>& want) {
          int equal = 0;
          for (const auto& [name, sha] : h) equal += want.count(name) && want.at(name) == sha;
          return equal;
        };
        const int equal_first = equal_to(first);
        rec.probes_equal_first = equal_first;
        if (equal_first != kProbes)
          report.fail("scheduling: " + s.name + " cycle " + std::to_string(cycle) + ": " +
                      std::to_string(kProbes - equal_first) + " of the ten probes differ from the first run's");
        if (host_check) {
          const int equal = equal_to(reference);
          rec.probes_equal_host = equal;
          if (equal != kProbes) report.fail("scheduling: " + s.name + " cycle " + std::to_string(cycle) + ": " +
                                            std::to_string(kProbes - equal) + " of the ten probes differ from the host block");
        }
        if (index == 0)
          for (const auto& [name, t] : run.probes.named())
            report.writer().write("/probes/" + s.name + "/" + name, *t,
                                  hdf5::TensorMeta{variant.name, "first-block probe " + name, "", {}});
      }
      report.add_case(index++, rec);
    }
}

std::vector<Table> tabulate_scheduling(const nlohmann::json& case_records, const nlohmann::json& options) {
  struct Agg {
    std::vector<double> walls, blocks;
    nlohmann::json run;
    bool all_equal = true;
    int runs = 0;
    std::string outcome = "complete";
  };
  const auto cases = case_records.get<std::vector<SchedulingCase>>();
  std::map<std::string, Agg> by;
  std::vector<std::string> order;
  std::optional<std::map<std::string, std::string>> first_hashes;
  std::string arena, inputs, row_tile;
  bool host_checked = false, resident = false;
  for (const SchedulingCase& c : cases) {
    const std::string& s = c.schedule;
    if (!by.count(s)) order.push_back(s);
    Agg& a = by[s];
    arena = c.arena;
    if (c.row_tile) row_tile = ", row tile " + std::to_string(*c.row_tile);
    inputs = c.inputs;
    if (c.outcome != "complete") {
      a.outcome = c.outcome;
      a.all_equal = false;
      continue;
    }
    const auto& hashes = *c.probe_sha256;
    if (!first_hashes) first_hashes = hashes;
    ++a.runs;
    a.all_equal = a.all_equal && hashes == *first_hashes && (!c.probes_equal_host || *c.probes_equal_host == kProbes);
    host_checked = host_checked || c.probes_equal_host;
    resident = resident || c.weights == "host-resident";
    if (!c.warmup) {
      a.walls.push_back(c.wall_s);
      a.blocks.push_back(c.block_s.value_or(0.0));
    }
    a.run = c.run;
  }
  Table t;
  t.title = "PSI schedules on the first block (Table IV) — model " + recorded_model(options) +
            ", arena " + arena + row_tile;
  t.columns = {"schedule", "wall (ms, mean ± SD)", "weights H2D", "journal H2D + D2H", "journal commits / reloads / resident",
               "blocking syncs", "managed peak / bound", std::to_string(kProbes) + " probes bitwise equal in every run"};
  nlohmann::json runs = nlohmann::json::array();
  for (const SchedulingCase& c : cases) runs.push_back(c.run);
  const bool gpu = any_gpu_memory(runs);
  if (gpu) t.columns.insert(t.columns.end(), {"GPU process peak (NVML)", "device used peak (NVML)"});
  // With host-resident weights the block's own time is reported beside the whole run's.
  if (resident) t.columns.insert(t.columns.begin() + 2, "block (ms, mean ± SD)");
  const auto mean_sd = [](const std::vector<double>& v) {
    return fmt_fixed((v.empty() ? 0.0 : mean(v)) * 1e3, 1) + " ± " + fmt_fixed(sample_sd(v) * 1e3, 1);
  };
  for (const std::string& s : order) {
    const Agg& a = by[s];
    const auto& r = a.run;
    if (r.is_null()) {
      std::vector<std::string> row{s, "-", "-", "-", "-", "-", "-", a.outcome};
      if (gpu) row.insert(row.end(), {"-", "-"});
      if (resident) row.insert(row.begin() + 2, "-");
      t.add_row(std::move(row));
      continue;
    }
    std::vector<std::string> row{s, mean_sd(a.walls), fmt_mib(r["h2d_bytes"]["weights"]),
               fmt_mib(r["h2d_bytes"]["journal"].get<double>() + r["d2h_bytes"]["journal"].get<double>()),
               std::to_string(r["journal_commits"].get<long long>()) + " / " +
                   std::to_string(r["journal_reloads"].get<long long>()) + " / " +
                   std::to_string(r["journal_kept_resident"].get<long long>()),
               std::to_string(r["blocking_syncs"].get<long long>()),
               fmt_mib(r["managed_peak_bytes"]) + " / " + fmt_mib(r["bound_bytes"]),
               a.all_equal ? "yes (" + std::to_string(a.runs) + " runs)" : "NO"};
    if (resident) row.insert(row.begin() + 2, mean_sd(a.blocks));
    if (gpu) {
      row.insert(row.end(), {gpu_process_peak_cell(r), gpu_device_peak_cell(r)});
      t.notes.push_back(s + ": " + gpu_memory_note(r));
    }
    t.add_row(std::move(row));
  }
  t.notes.push_back("inputs: " + inputs + "; variant " + kRuntimeVariant + "; bitwise: every run's probes equal the first run's" +
                    (host_checked ? std::string(" and the host block's") : std::string(" (the host block is not the reference on a GPU: cuBLASLt products)")) +
                    " (SHA-256).");
  if (resident)
    t.notes.push_back("weights host-resident (pinned, loaded before each block): block = the block's own time, wall = "
                      "the whole run with runtime set-up and the weight load.");
  return {t};
}

}  // namespace psi::exp
