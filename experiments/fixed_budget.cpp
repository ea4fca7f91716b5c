// fixed-budget (Table VII): a complete 8+3 run through the PSI executor under a fixed cap on
// available memory, against the uncapped run (the same variant on whole host tensors): success,
// wall, managed peak and what the run held, and bitwise equality of every saved state to the
// uncapped run. On CUDA the cap is the free device pool a reservation allocation leaves (--pool,
// default 3 GiB), made before the arena and held to the end: any device allocation beyond it
// fails the run; the GPU memory sampled through NVML is shown beside it. On the CPU backend
// there is no device memory to reserve (the reservation is reported as not applicable) and the
// cap bounds what the run may hold — the arena and its pinned host buffers — scaled like the
// arena for smaller configs (ltx2-22b: the pool itself), enforced by the runtime: an allocation
// that would pass it fails the run (rt::Outcome::cap_exceeded, exit 3) before it is made. The
// capped run goes first, so that a cap the run cannot fit fails before the uncapped run.
#include "experiments/experiment.h"
#include "experiments/paper_line.h"
#include "experiments/report.h"

#include <chrono>

#include "engine/error.h"
#include "engine/exec/arena_settings.h"
#include "engine/exec/executor.h"
#include "engine/measure/budget.h"
#include "engine/measure/sizes.h"
#include "engine/model/variant.h"
#include "engine/progress.h"
#include "engine/runtime/run_report.h"
#include "engine/sha256.h"
#include "experiments/block_support.h"
#include "experiments/gpu_memory_cells.h"
#include "experiments/trajectory_support.h"
#include "probes/probe_cases.h"

namespace psi::exp {

// The options of fixed-budget alone.
struct FixedBudgetOptions {
  // The free device pool a reservation leaves on CUDA; on the CPU backend the cap on arena +
  // pinned host buffers, scaled like the arena for smaller configs.
  std::uint64_t pool_bytes = rt::kDefaultPoolBytes;
  static auto fields() { return std::tuple{field_if_present("pool_bytes", &FixedBudgetOptions::pool_bytes)}; }
};

// The capped run against the uncapped one.
struct FixedBudgetCase {
  std::int64_t cap_bytes = 0;
  std::optional<std::string> cap_scope;  // absent in reports before CUDA's pool
  std::string arena;
  std::uint64_t held_bytes = 0;
  bool fits = false;
  nlohmann::json run;
  double capped_wall_mean_s = 0, capped_wall_sd_s = 0, uncapped_wall_mean_s = 0, uncapped_wall_sd_s = 0;
  std::int64_t states_equal = 0, states_total = 0;
  std::optional<int> states_nonfinite;   // absent in reports before the check
  std::optional<std::int64_t> pool_bytes;  // --pool as given; absent in reports before it was recorded
  static auto fields() {
    using R = FixedBudgetCase;
    return std::tuple{field("cap_bytes", &R::cap_bytes),
                      field_optional("cap_scope", &R::cap_scope),
                      field("arena", &R::arena),
                      field("held_bytes", &R::held_bytes),
                      field("fits", &R::fits),
                      field("run", &R::run),
                      field("capped_wall_mean_s", &R::capped_wall_mean_s).measures_time(),
                      field("capped_wall_sd_s", &R::capped_wall_sd_s).measures_time(),
                      field("uncapped_wall_mean_s", &R::uncapped_wall_mean_s).measures_time(),
                      field("uncapped_wall_sd_s", &R::uncapped_wall_sd_s).measures_time(),
                      field("states_equal", &R::states_equal),
                      field("states_total", &R::states_total),
                      field_optional("states_nonfinite", &R::states_nonfinite),
                      field_optional("pool_bytes", &R::pool_bytes)};
  }
};

// The cap as given (--pool) and, where psi scaled it with the model, the cap the run is held to:
// the table's cell and the error of a run that does not fit.
std::string cap_label(std::int64_t pool, std::int64_t cap, const std::string& model) {
  if (pool == cap) return fmt_mib(double(cap));
  return fmt_mib(double(pool)) + " (" + fmt_mib(double(cap)) + " scaled to model " + model + ")";
}

// --pool: a positive amount (rt::parse_capacity).
void set_pool(const std::string& value, Options& o) {
  const std::uint64_t pool = rt::parse_capacity(value, "--pool");
  if (pool == 0) throw Error("--pool " + value + ": the pool must be positive");
  set_own_options(o, FixedBudgetOptions{pool});
}

void run_fixed_budget(const Options& o, Report& report) {
  const model::ModelConfig c = model::model_config(o.model, o.profile);
  const model::NumericsVariant variant = variant_of(o, kRuntimeVariant);
  const exec::ArenaSettings arena = exec::default_arena(c);
  const bool on_device = rt::backend_traits(o.backend).device_pool;
  const std::uint64_t pool = own_options<FixedBudgetOptions>(o).pool_bytes;
  const std::int64_t cap = on_device ? std::int64_t(pool) : exec::scale_bytes(c, std::int64_t(pool));
  auto weights = block_weight_source(o, c, o.seed);
  auto host = make_weights(o, o.seed);
  const std::string& inputs = probes::trajectory_recording(1).group;  // the recorded trajectory's input names
  pipeline::TrajectoryCase tc{inputs, inputs, 1, o.seed, o.seed};

  Progress::expect_parts(2);  // the capped and the uncapped run
  pipeline::TrajectoryResult capped;
  rt::RunReport run;
  {
    // Before the executor, whose first block allocates the arena; held through the capped run.
    const rt::FixedBudget budget(rt::backend_name(o.backend), pool);
    exec::ExecOptions eo;
    eo.backend = rt::backend_name(o.backend);
    if (o.chaos_seed) eo.chaos_seed = o.chaos_seed;
    if (!on_device) eo.memory_cap = std::uint64_t(cap);
    exec::PsiExecutor ex(c, *weights, variant, exec::schedule("reuse+prefetch"), arena, eo);
    pipeline::TrajectoryHooks hooks;
    hooks.block_runner = [&](int b, const model::BlockInputs& in) { return ex.run_block(b, in); };
    try {
      capped = run_with_progress(c, *host, tc, variant, "fixed-budget capped (PSI)", hooks);
    } catch (const rt::RunFailure& f) {
      if (f.outcome() != rt::Outcome::cap_exceeded) throw;
      throw rt::RunFailure(f.outcome(), "fixed-budget --pool " + cap_label(std::int64_t(pool), cap, c.name) +
                                            ": the run does not fit: " + f.what());
    }
    run = ex.finish();
    run.reservation = budget.report();
  }
  const auto uncapped = run_with_progress(c, *host, tc, variant, "fixed-budget uncapped (host)");
  // On CUDA the pinned buffers are host memory, outside the device pool: the run's device
  // allocation is its arena.
  const std::uint64_t held = on_device ? run.layout.arena : run.layout.arena + run.pinned_bytes;
  int equal = 0;
  for (std::size_t i = 0; i < capped.states.size(); ++i)
    equal += (sha256_hex(capped.states[i].video) == sha256_hex(uncapped.states[i].video)) +
             (sha256_hex(capped.states[i].audio) == sha256_hex(uncapped.states[i].audio));
  save_states(report, "/states/capped", capped.states, variant.name);
  save_states(report, "/states/uncapped", uncapped.states, variant.name);
  auto [cm, cs] = wall_mean_sd(capped.invocations);
  auto [um, us] = wall_mean_sd(uncapped.invocations);
  const bool fits = std::int64_t(held) <= cap;
  if (!fits) report.fail("fixed-budget: the run held " + fmt_mib(double(held)) + ", over the cap of " + fmt_mib(double(cap)));
  if (equal != int(2 * capped.states.size()))
    report.fail("fixed-budget: capped states differ from the uncapped run (all of it: psi compare " +
                    report.path().string() + " " + report.path().string() + " --only '^/states/capped/' --map " +
                    "/states/capped=/states/uncapped)",
                state_difference_lines(capped.states, uncapped.states, "capped", "uncapped"));
  const int nonfinite = nonfinite_latents(capped.states);
  if (nonfinite > 0)
    report.fail("fixed-budget: " + std::to_string(nonfinite) + " of " + std::to_string(2 * capped.states.size()) +
                " capped states hold NaN or Inf; their bitwise equality proves nothing");
  report.add_case(0, FixedBudgetCase{cap,
                                     on_device ? "the free device pool left by the reservation (arena held)"
                                               : "arena + pinned host buffers (cpu backend, scaled with the model)",
                                     arena.label, held, fits, rt::to_json(run), cm, cs, um, us, equal,
                                     std::int64_t(2 * capped.states.size()), nonfinite, std::int64_t(pool)});
}

// The table's cap: reports before pool_bytes was recorded give the cap alone.
std::string cap_cell(const FixedBudgetCase& c, const std::string& model) {
  return c.pool_bytes ? cap_label(*c.pool_bytes, c.cap_bytes, model) : fmt_mib(double(c.cap_bytes));
}

std::vector<Table> tabulate_fixed_budget(const nlohmann::json& case_records, const nlohmann::json& options) {
  const auto cases = case_records.get<std::vector<FixedBudgetCase>>();
  Table t;
  t.title = "complete 8+3 run under a fixed memory cap (Table VII) — model " + recorded_model(options);
  t.columns = {"cap", "success", "held", "managed peak / bound", "invocation wall capped (s)",
               "uncapped (s)", "states bitwise equal to uncapped", "reservation"};
  t.time_columns = {"invocation wall capped (s)", "uncapped (s)"};
  nlohmann::json runs = nlohmann::json::array();
  for (const FixedBudgetCase& c : cases) runs.push_back(c.run);
  const bool gpu = any_gpu_memory(runs);
  if (gpu) t.columns.insert(t.columns.end(), {"GPU process peak (NVML)", "device used peak (NVML)"});
  for (const FixedBudgetCase& c : cases) {
    const auto& r = c.run;
    std::vector<std::string> row{
        cap_cell(c, recorded_model(options)), c.fits ? "yes" : "NO", fmt_mib(double(c.held_bytes)),
        fmt_mib(r["managed_peak_bytes"]) + " / " + fmt_mib(r["bound_bytes"]),
        fmt_fixed(c.capped_wall_mean_s, 3) + " ± " + fmt_fixed(c.capped_wall_sd_s, 3),
        fmt_fixed(c.uncapped_wall_mean_s, 3) + " ± " + fmt_fixed(c.uncapped_wall_sd_s, 3),
        std::to_string(c.states_equal) + " / " + std::to_string(c.states_total) +
            nonfinite_note(c.states_nonfinite.value_or(0)),
        reservation_cell(r)};
    if (gpu) row.insert(row.end(), {gpu_process_peak_cell(r), gpu_device_peak_cell(r)});
    t.add_row(std::move(row));
    t.notes.push_back("arena " + c.arena + "; the uncapped run is the same variant (" + kRuntimeVariant +
                      ") on whole host tensors, with no arena.");
    // Reports written before the cap's scope was recorded capped arena + pinned buffers.
    t.notes.push_back("cap and held: " + c.cap_scope.value_or("arena + pinned host buffers") + ".");
    if (r.contains("reservation")) t.notes.push_back("reservation: " + r["reservation"].value("status", std::string("?")));
    if (gpu) t.notes.push_back(gpu_memory_note(r));
  }
  t.notes.push_back(paper_note("Table VII, LTX-2 22B: a complete 8+3 run under a fixed cap, with its success, wall "
                               "and peak; psi's row corresponds, and the values are in the paper's Table VII",
                               options));
  return {t};
}

const Registration fixed_budget_registration{7, {
    .name = "fixed-budget",
    .reproduces = "Table VII",
    .summary = "a complete 8+3 run under a fixed memory cap: success, wall, peak, states bitwise equal to the "
               "uncapped run",
    .run = run_fixed_budget,
    .tabulate = tabulate_fixed_budget,
    .options = {{.flag = "--pool",
                 .help = "fixed-budget: the free device memory a reservation leaves for the run on CUDA (default "
                         "3GiB; units bytes, KiB, MiB, GiB); on the CPU backend the cap on arena + pinned buffers, "
                         "scaled with the model",
                 .apply = set_pool}},
    .own_defaults = FixedBudgetOptions{},
    .reread = reread_as<FixedBudgetCase>,
    .time_fields = time_keys_of<FixedBudgetCase>,
    .provenance_fields = provenance_keys_of<FixedBudgetCase>}};

}  // namespace psi::exp
