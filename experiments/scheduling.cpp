// scheduling (Table IV): the four PSI schedules (baseline, FFN reuse, reuse + async journal,
// reuse + prefetch) on the first block in the default arena; one warm-up cycle, then five
// measured cycles with the order rotated each cycle; wall mean and sample SD; every run's ten
// probes checked bitwise against the first run and against the host block; bytes moved and
// blocking synchronizations per schedule.
#include "experiments/scheduling.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <optional>
#include <set>
#include <sstream>

#include "engine/error.h"
#include "engine/exec/executor.h"
#include "engine/exec/tiling.h"
#include "engine/interrupt.h"
#include "engine/model/block_catalogue.h"
#include "engine/model/variant.h"
#include "engine/model/weights.h"
#include "engine/progress.h"
#include "engine/runtime/run_report.h"
#include "engine/whole_number.h"
#include "experiments/block_support.h"
#include "experiments/device_summary.h"
#include "experiments/experiment.h"
#include "experiments/gpu_memory_cells.h"
#include "experiments/paper_line.h"
#include "experiments/report.h"
#include "report/stats.h"

namespace psi::exp {

namespace {
constexpr int kProbes = int(model::kTapCount);  // the probe hashes each run is compared on
}  // namespace

// The options of scheduling alone.
struct SchedulingOptions {
  // Token rows per row tile; 0: the config's default; -1: the largest that fits the arena under
  // every schedule (exec::fitting_row_tile).
  std::int64_t row_tile = 0;
  static auto fields() { return std::tuple{field_if_present("row_tile", &SchedulingOptions::row_tile)}; }
};

// One run of one schedule in one cycle (cycle 0: the warm-up).
struct SchedulingCase {
  std::string schedule;
  int cycle = 0;
  bool warmup = false;
  std::string arena;
  std::optional<std::int64_t> row_tile;  // absent in reports before --row-tile
  std::string outcome, failure;
  double wall_s = 0, preload_s = 0;
  std::optional<double> block_s;         // absent in reports before host-resident weights
  std::optional<std::string> weights;    // "host-resident" | "staged"; absent likewise
  std::uint64_t weight_bytes_streamed = 0;
  nlohmann::json run;
  std::string inputs;
  // A complete run's probes: their SHA-256 (the tables compare every complete run's), and how
  // many equal the first run's and (CPU backend) the host block's.
  std::optional<std::map<std::string, std::string>> probe_sha256;
  std::optional<int> probes_equal_first, probes_equal_host;
  static auto fields() {
    using R = SchedulingCase;
    return std::tuple{field("schedule", &R::schedule),
                      field_if_present("cycle", &R::cycle),
                      field("warmup", &R::warmup),
                      field("arena", &R::arena),
                      field_optional("row_tile", &R::row_tile),
                      field("outcome", &R::outcome),
                      field_if_present("failure", &R::failure),
                      field("wall_s", &R::wall_s).measures_time(),
                      field_if_present("preload_s", &R::preload_s).measures_time(),
                      field_optional("block_s", &R::block_s).measures_time(),
                      field_optional("weights", &R::weights),
                      field_if_present("weight_bytes_streamed", &R::weight_bytes_streamed),
                      field("run", &R::run),
                      field("inputs", &R::inputs),
                      field_optional("probe_sha256", &R::probe_sha256)
                          .when(+[](const R& r) { return r.outcome == "complete"; }),
                      field_optional("probes_equal_first", &R::probes_equal_first),
                      field_optional("probes_equal_host", &R::probes_equal_host)};
  }
};

// --row-tile: a positive number of rows, or "fit".
void set_row_tile(const std::string& value, Options& o) {
  if (value == "fit") {
    set_own_options(o, SchedulingOptions{-1});
    return;
  }
  const auto v = parse_whole(value, 1, std::uint64_t(std::numeric_limits<std::int64_t>::max()));
  if (!v) throw Error("--row-tile '" + value + "': expected a positive number of rows or 'fit'");
  if (*v % exec::kRowTileGranule != 0)
    throw Error("--row-tile " + value + ": not a multiple of " + std::to_string(exec::kRowTileGranule) +
                " rows (the row-tile granule; e.g. " + std::to_string(std::max<std::uint64_t>(1, *v / exec::kRowTileGranule) * exec::kRowTileGranule) + ")");
  set_own_options(o, SchedulingOptions{std::int64_t(*v)});
}

void run_scheduling(const Options& o, Report& report) {
  const FirstBlock fb = first_block(o);
  const model::NumericsVariant variant = variant_of(o, kRuntimeVariant);
  const exec::ArenaSettings arena = exec::default_arena(fb.config);
  // On the CPU backend the executor's arithmetic is the host block's, so every run is checked
  // against it too. On CUDA the products are cuBLASLt's (docs/cuda-backend.md): the transport
  // claim is that every schedule and cycle gives the first run's bits.
  const bool host_check = rt::backend_traits(o.backend).host_bits;
  // The probes are kept beside their hashes to say where a run's differ.
  std::map<std::string, std::string> reference;
  std::optional<model::BlockTaps> reference_probes;
  if (host_check) {
    model::SynthInitSource host_weights(o.seed);
    reference_probes = model::block_forward(fb.config, model::load_block_weights(host_weights, fb.config, 0),
                                            fb.inputs, variant);
    reference = probe_hashes(*reference_probes);
  }
  std::map<std::string, std::string> first;
  std::optional<model::BlockTaps> first_probes;

  exec::ExecOptions eo;
  eo.backend = rt::backend_name(o.backend);
  if (o.chaos_seed) eo.chaos_seed = o.chaos_seed;
  // On a GPU the block's time is what the transfer floor bounds: weights host-resident, so the
  // weight source (SynthInit generation, file reads) is outside it.
  eo.resident_weights = rt::backend_traits(o.backend).resident_weights;
  const std::int64_t requested_tile = own_options<SchedulingOptions>(o).row_tile;
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
        if (first.empty()) {
          first = h;
          first_probes = run.probes;
        }
        const auto equal_to = [&](const std::map<std::string, std::string>& want) {
          int equal = 0;
          for (const auto& [name, sha] : h) equal += want.count(name) && want.at(name) == sha;
          return equal;
        };
        const int equal_first = equal_to(first);
        rec.probes_equal_first = equal_first;
        if (equal_first != kProbes)
          report.fail("scheduling: " + s.name + " cycle " + std::to_string(cycle) + ": " +
                          std::to_string(kProbes - equal_first) + " of the ten probes differ from the first run's",
                      probe_difference_lines(run.probes, *first_probes, s.name, "first run"));
        if (host_check) {
          const int equal = equal_to(reference);
          rec.probes_equal_host = equal;
          if (equal != kProbes)
            report.fail("scheduling: " + s.name + " cycle " + std::to_string(cycle) + ": " +
                            std::to_string(kProbes - equal) + " of the ten probes differ from the host block",
                        probe_difference_lines(run.probes, *reference_probes, s.name, "host"));
        }
        if (index == 0)
          for (const auto& [name, t] : run.probes.named())
            report.writer().write("/probes/" + s.name + "/" + name, *t,
                                  hdf5::TensorMeta{variant.name, "first-block probe " + name, "", {}});
      }
      report.add_case(index++, rec);
    }
}

namespace {

constexpr const char* kWallChange = "wall change";

// "+3.2 %", "-24.4 %": one decimal, two below 1 % (the paper gives -0.43 %).
std::string fmt_signed_percent(double pct) {
  const std::string digits = fmt_fixed(std::fabs(pct), std::fabs(pct) < 1.0 ? 2 : 1);
  return std::string(pct < 0 ? "-" : "+") + digits + " %";
}

}  // namespace

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
  t.columns = {"schedule", "wall (ms, mean ± SD)", kWallChange, "weights H2D", "journal H2D + D2H", "journal commits / reloads / resident",
               "blocking syncs", "managed peak / bound", std::to_string(kProbes) + " probes bitwise equal in every run"};
  nlohmann::json runs = nlohmann::json::array();
  for (const SchedulingCase& c : cases) runs.push_back(c.run);
  const bool gpu = any_gpu_memory(runs);
  if (gpu) t.columns.insert(t.columns.end(), {"GPU process peak (NVML)", "device used peak (NVML)"});
  // With host-resident weights the block's own time is reported beside the whole run's.
  if (resident) t.columns.insert(t.columns.begin() + 2, "block (ms, mean ± SD)");
  t.time_columns = {"wall (ms, mean ± SD)", kWallChange};
  if (resident) t.time_columns.push_back("block (ms, mean ± SD)");
  const auto mean_sd = [](const std::vector<double>& v) {
    return fmt_fixed((v.empty() ? 0.0 : mean(v)) * 1e3, 1) + " ± " + fmt_fixed(sample_sd(v) * 1e3, 1);
  };
  // Each schedule adds one change to the row above it: the paper states each one's effect on the
  // wall against the previous (Table IV's text).
  std::optional<double> above;
  for (const std::string& s : order) {
    const Agg& a = by[s];
    const auto& r = a.run;
    const std::optional<double> wall = a.walls.empty() ? std::nullopt : std::optional<double>(mean(a.walls));
    const std::string change = wall && above ? fmt_signed_percent(100.0 * (*wall - *above) / *above) : "-";
    above = wall;
    if (r.is_null()) {
      std::vector<std::string> row{s, "-", "-", "-", "-", "-", "-", "-", a.outcome};
      if (gpu) row.insert(row.end(), {"-", "-"});
      if (resident) row.insert(row.begin() + 2, "-");
      t.add_row(std::move(row));
      continue;
    }
    std::vector<std::string> row{s, mean_sd(a.walls), change, fmt_mib(r["h2d_bytes"]["weights"]),
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
  t.notes.push_back(std::string(kWallChange) + ": the mean wall against the row above's, timed on this machine.");
  t.notes.push_back(paper_note("Table IV's text, LTX-2 22B on an H200: ffn-reuse -4.0 % against the scheduling "
                               "baseline, reuse+async-journal a further -3.2 %, reuse+prefetch -0.43 %",
                               options));
  return {t};
}

std::uint64_t block_weight_bytes(const model::ModelConfig& c) {
  std::uint64_t n = 0;
  for (const auto& w : model::block_weight_specs(c, 0)) n += std::uint64_t(numel(w.shape));
  return n * 2;
}

SchedulingSummary summarize_scheduling(const nlohmann::json& case_records) {
  const auto cases = case_records.get<std::vector<SchedulingCase>>();
  SchedulingSummary s;
  std::map<std::string, std::size_t> index;
  std::map<std::string, std::set<std::string>> hashes;  // probe -> distinct SHA-256 over runs
  for (const SchedulingCase& c : cases) {
    if (!index.count(c.schedule)) {
      index[c.schedule] = s.schedules.size();
      s.schedules.push_back({});
      s.schedules.back().name = c.schedule;
    }
    ScheduleRow& row = s.schedules[index[c.schedule]];
    s.arena = c.arena;
    s.inputs = c.inputs;
    if (c.outcome != "complete") {
      if (row.outcome == "complete") row.outcome = c.outcome;
      continue;
    }
    ++row.runs;
    ++s.completed_runs;
    if (!c.warmup) {
      row.walls_s.push_back(c.wall_s);
      if (c.block_s) row.blocks_s.push_back(*c.block_s);
    }
    row.resident = row.resident || c.weights == "host-resident";
    const auto fewest = [](const std::optional<int>& equal, int& into) {
      if (equal) into = into < 0 ? *equal : std::min(into, *equal);
    };
    fewest(c.probes_equal_first, row.probes_equal_first_min);
    fewest(c.probes_equal_host, row.probes_equal_host_min);
    for (const auto& [probe, sha] : *c.probe_sha256) hashes[probe].insert(sha);
    row.run = c.run;
  }
  // A probe counts as equal across runs only if every completed run hashed it once, alike.
  for (const auto& [probe, set] : hashes) {
    ++s.probe_names;
    int seen = 0;
    for (const SchedulingCase& c : cases)
      if (c.outcome == "complete" && c.probe_sha256->count(probe)) ++seen;
    if (set.size() == 1 && seen == s.completed_runs) ++s.probes_equal_across;
  }
  return s;
}

namespace {

// The device check's section: each schedule's block time against the transfer floor of one
// block's weights at the measured H2D rate.
std::string scheduling_device_summary(const DeviceSummaryInput& in) {
  std::ostringstream o;
  const SchedulingSummary s = summarize_scheduling(in.cases);
  const std::string model = in.options.value("model", std::string()),
                    profile = in.options.value("profile", std::string("ltx25"));
  std::optional<double> weights;
  std::string weights_why;
  try {
    weights = double(block_weight_bytes(model::model_config(model, profile)));
  } catch (const Error& e) {
    weights_why = e.what();
  }
  double page = 0;
  for (const auto& row : s.schedules)
    if (!row.run.is_null()) page = num(row.run, "page_bytes");
  const std::optional<DeviceSummaryInput::Copy> copy = in.copy_for_page(page);

  Table t;
  t.columns = {"schedule", "block (ms, mean ± SD, n)", "transfer floor (ms)", "block / floor", "whole run (ms)",
               "weights streamed", "floor of the bytes streamed (ms)", "block / that floor", "managed peak / bound",
               "scratch / workspace high water", "process peak (NVML)", "device used peak (NVML)",
               "probes = first run's (fewest)", "probes = CPU block (fewest)"};
  // The measured copy rate sets both floors: they, and the ratios to them, vary as the times do.
  t.time_columns = {"block (ms, mean ± SD, n)", "transfer floor (ms)", "block / floor", "whole run (ms)",
                    "floor of the bytes streamed (ms)", "block / that floor"};
  bool any_resident = false, any_block_time = false;
  for (const ScheduleRow& row : s.schedules) {
    if (row.run.is_null()) {
      t.add_row({row.name, row.outcome, "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-"});
      continue;
    }
    any_resident = any_resident || row.resident;
    any_block_time = any_block_time || !row.blocks_s.empty();
    const auto& times = row.block_times();
    const double block = mean(times);
    const double streamed = row.run.contains("h2d_bytes") ? num(row.run["h2d_bytes"], "weights") : std::nan("");
    std::string floor = "unavailable", ratio = "unavailable", sfloor = "unavailable", sratio = "unavailable";
    if (copy && weights) {
      const double fl = transfer_seconds(*weights, copy->h2d_gbps);
      floor = ms(fl);
      if (!times.empty()) ratio = fmt_fixed(block / fl, 2);
    }
    if (copy && std::isfinite(streamed)) {
      const double fl = transfer_seconds(streamed, copy->h2d_gbps);
      sfloor = ms(fl);
      if (!times.empty()) sratio = fmt_fixed(block / fl, 2);
    }
    const auto fewest = [](int n, const char* absent) { return n < 0 ? std::string(absent) : std::to_string(n) + " / 10"; };
    t.add_row({row.name,
               times.empty() ? "no measured run"
                             : ms(block) + " ± " + ms(sample_sd(times)) + " (" + std::to_string(times.size()) + ")",
               floor, ratio,
               row.walls_s.empty() ? "-" : ms(mean(row.walls_s)) + " ± " + ms(sample_sd(row.walls_s)),
               amount(streamed), sfloor, sratio, bytes_pair(row.run, "managed_peak_bytes", "bound_bytes"),
               bytes_pair(row.run, "scratch_high_water_bytes", "workspace_high_water_bytes"),
               gpu_process_peak_cell(row.run), gpu_device_peak_cell(row.run),
               fewest(row.probes_equal_first_min, "not recorded"), fewest(row.probes_equal_host_min, "not checked")});
  }
  o << md_table(t) << "\n";
  o << "- ten probes bitwise equal across the schedules: **" << s.probes_equal_across << " of " << s.probe_names
    << "** probes have one SHA-256 in all " << s.completed_runs << " completed runs\n";
  if (any_block_time)
    o << "- block time: the block's own (`block_s`: from journaling its inputs to its probes collected; runtime "
         "set-up, planning and preloading outside it), "
      << (any_resident ? "its weights made host-resident before it" : "its weights produced by the weight source inside it")
      << ", over the measured cycles (warm-up excluded); whole run: the same runs' wall time\n";
  else
    o << "- block time: the whole run's wall time (the report records no separate block time)\n";
  o << "- probes = CPU block: the CPU backend's host block (`block_forward`), SHA-256; \"not checked\" where the "
       "scheduling report does not compare with it (on CUDA the products are cuBLASLt's: docs/cuda-backend.md)\n";
  if (!s.schedules.empty() && !s.schedules.front().run.is_null()) {
    const auto& run = s.schedules.front().run;
    o << "- " << gpu_memory_note(run) << "\n";
    o << "- arena " << amount(num(run, "arena_bytes")) << ": pages " << amount(num(run, "page_bytes"))
      << ", workspace " << amount(num(run, "workspace_bytes")) << ", scratch " << amount(num(run, "scratch_bytes"))
      << " (" << s.arena << "); backend " << run.value("backend", std::string("?")) << "\n";
  }
  if (weights && copy)
    o << "- transfer floor = one block's BF16 weights, " << fmt_count((long long)*weights) << " bytes, over the pinned "
      << "H2D rate at the copy size nearest the page (" << fmt_mib(copy->mib * 1048576.0) << ": "
      << fmt_fixed(copy->h2d_gbps, 2) << " GB/s, measured by this check); the second floor puts the weight bytes "
      << "the schedule actually streamed over the same rate\n";
  else
    o << "- transfer floor unavailable: "
      << (!weights ? "block weights unknown (" + weights_why + ")" : std::string("no measured H2D copy rate")) << "\n";
  std::string row_tile = "the config's default";
  for (const SchedulingCase& c : in.cases.get<std::vector<SchedulingCase>>())
    if (c.row_tile) row_tile = std::to_string(*c.row_tile) + " rows";
  o << "- inputs: " << s.inputs << "; model " << model << " (" << profile << "); row tile " << row_tile << "\n\n";
  return o.str();
}

}  // namespace

const Registration scheduling_registration{4, {
    .name = "scheduling",
    .reproduces = "Table IV",
    .summary = "four PSI schedules on the first block: wall mean ± SD over rotated cycles, bitwise check of the ten "
               "probes in every run, bytes moved and blocking synchronizations",
    .run = run_scheduling,
    .tabulate = tabulate_scheduling,
    .options = {{.flag = "--row-tile",
                 .help = "scheduling: token rows per row tile (a multiple of the 128-key tile), or 'fit': the "
                         "largest whose live set fits the arena under every schedule (fewer weight passes); "
                         "default: the config's",
                 .apply = set_row_tile}},
    .own_defaults = SchedulingOptions{},
    .reread = reread_as<SchedulingCase>,
    .time_fields = time_keys_of<SchedulingCase>,
    .provenance_fields = provenance_keys_of<SchedulingCase>,
    .device_summary = scheduling_device_summary}};

}  // namespace psi::exp
