#include "engine/exec/executor.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "engine/backend/backend_factory.h"
#include "engine/error.h"
#include "engine/exec/block_program.h"
#include "engine/exec/tiling.h"
#include "engine/measure/sizes.h"
#include "engine/progress.h"
#include "engine/runtime/journal_transport.h"
#include "engine/runtime/pages.h"
#include "engine/runtime/resident_weights.h"

namespace psi::exec {

namespace {

// The journal ring: slots as large as the largest committed tensor, so a commit is one copy.
constexpr std::size_t kRingSlots = 8;

std::int64_t row_tile_of(const model::ModelConfig& c, std::int64_t requested) {
  if (requested < 0) throw Error("PSI executor: row tile " + std::to_string(requested) + " must be positive (0: the default)");
  return requested == 0 ? default_row_tile(c) : requested;
}

BlockPlan plan_of(const model::ModelConfig& c, const model::NumericsVariant& v, const Schedule& s,
                  const rt::ArenaLayout& layout, const BlockShapes& shapes, std::int64_t row_tile, int index,
                  int jblock) {
  const BlockTask task{c, v, s, index, jblock, shapes, row_tile};
  Driver planner(layout);
  block_program(planner, task);
  return planner.plan();
}

// The full-tile plan's S_live (online attention) or the whole scratch (MATH), and the full-tile
// plan's largest commit.
std::pair<std::uint64_t, std::uint64_t> declared(const model::ModelConfig& c, const model::NumericsVariant& v,
                                                 const Schedule& s, const rt::ArenaLayout& layout,
                                                 const BlockShapes& shapes, std::int64_t row_tile) {
  const BlockShapes full = full_tile_shapes(shapes, std::max(row_tile, v.key_tile));
  const BlockPlan p = plan_of(c, v, s, layout, full, row_tile, 0, 0);
  const bool online = v.attention == ops::SoftmaxForm::online;
  return {online ? p.scratch_bytes : layout.scratch, p.largest_commit};
}

}  // namespace

struct PsiExecutor::State {
  model::ModelConfig config;
  const ckpt::WeightSource& weights;
  model::NumericsVariant variant;
  Schedule schedule;
  ArenaSettings arena;
  ExecOptions options;
  rt::ArenaLayout layout;
  std::int64_t row_tile;

  // Declared so that the pager and the transport (which drains the streams) go first.
  std::unique_ptr<rt::Runtime> runtime;
  rt::HostJournal journal;
  std::unique_ptr<rt::JournalTransport> transport;
  std::unique_ptr<rt::ResidentWeights> resident;
  std::unique_ptr<rt::WeightPager> pager;
  double preload_seconds = 0, block_seconds = 0;
  BlockPlan plan;
  ExecCounters counters;
  int blocks_run = 0;
  std::string failed;  // the failure that ended the run, empty while healthy

  State(const model::ModelConfig& c, const ckpt::WeightSource& w, const model::NumericsVariant& v, const Schedule& s,
        const ArenaSettings& a, const ExecOptions& o)
      : config(c), weights(w), variant(v), schedule(s), arena(a), options(o),
        layout(rt::ArenaLayout::make(a.arena, a.page, a.workspace)), row_tile(row_tile_of(c, o.row_tile)) {}

  void make_runtime(const BlockShapes& shapes) {
    const auto [live, largest_commit] = declared(config, variant, schedule, layout, shapes, row_tile);
    rt::RuntimeConfig rc;
    rc.backend = options.backend;
    rc.arena_bytes = arena.arena;
    rc.page_bytes = arena.page;
    rc.workspace_bytes = arena.workspace;
    rc.live_bytes = std::int64_t(std::min(live, layout.scratch));
    rc.eps_bytes = 0;
    rc.validate = options.validate;
    rc.chaos_seed = options.chaos_seed;
    rc.fault = options.fault;
    rc.memory_cap = options.memory_cap;
    runtime = std::make_unique<rt::Runtime>(rc);
    rt::AsyncRingConfig ring;
    ring.slots = kRingSlots;
    ring.slot_bytes = rt::align_up(std::max<std::uint64_t>(largest_commit, 2));
    transport = std::make_unique<rt::JournalTransport>(*runtime, journal, schedule.journal, ring);
    if (options.resident_weights) resident = std::make_unique<rt::ResidentWeights>(*runtime, weights);
    pager = std::make_unique<rt::WeightPager>(*runtime, resident ? *resident : weights, schedule.copies);
  }
};

PsiExecutor::PsiExecutor(const model::ModelConfig& c, const ckpt::WeightSource& weights,
                         const model::NumericsVariant& v, const Schedule& s, const ArenaSettings& a,
                         const ExecOptions& o) {
  rt::check_backend_request(o.backend);  // before any work; the runtime resolves it at the first block
  if (s.ffn != ops::FfnSchedule::recompute && s.ffn != ops::FfnSchedule::reuse)
    throw Error("PSI schedule " + s.name + ": the FFN schedule must be recompute or reuse");
  st_ = std::make_unique<State>(c, weights, v, s, a, o);
}

PsiExecutor::~PsiExecutor() = default;

model::BlockTaps PsiExecutor::run_block(int index, const model::BlockInputs& in) {
  State& s = *st_;
  if (!s.failed.empty()) throw Error("PSI executor: the run already failed (" + s.failed + ")", Exit::run_failed);
  if (index < 0 || index >= s.config.layers)
    throw Error("PSI executor: block " + std::to_string(index) + " of a " + std::to_string(s.config.layers) +
                "-block model");
  const BlockTask task{s.config, s.variant, s.schedule, index, s.blocks_run, block_shapes(s.config, in), s.row_tile};
  s.plan = plan_of(s.config, s.variant, s.schedule, s.layout, task.shapes, s.row_tile, index, task.jblock);
  if (!s.runtime) s.make_runtime(task.shapes);
  try {
    if (s.resident) {
      const auto t0 = std::chrono::steady_clock::now();
      s.resident->load(s.plan.tiles);
      s.preload_seconds = seconds_since(t0);
    }
    const auto b0 = std::chrono::steady_clock::now();
    put_inputs(s.journal, task.jblock, s.config, in, s.row_tile);
    for (const rt::WeightSlice& w : s.plan.tiles) s.pager->push(w);
    Driver d(*s.runtime, *s.transport, *s.pager, s.plan, s.counters);
    block_program(d, task);
    s.transport->flush();
    ++s.blocks_run;
    model::BlockTaps probes = collect_probes(s.journal, task.jblock, task.shapes, s.row_tile);
    s.block_seconds = seconds_since(b0);
    return probes;
  } catch (const std::exception& e) {
    s.failed = e.what();
    s.runtime->drain();
    throw;
  }
}

rt::RunReport PsiExecutor::finish() { return runtime().finish(); }

rt::RunReport PsiExecutor::report() const {
  if (!st_->runtime) throw Error("PSI executor: no block has run yet (the runtime is sized by the first block)");
  return st_->runtime->report();
}

rt::Runtime& PsiExecutor::runtime() {
  if (!st_->runtime) throw Error("PSI executor: no block has run yet (the runtime is sized by the first block)");
  return *st_->runtime;
}

bool PsiExecutor::has_runtime() const { return st_->runtime != nullptr; }

const BlockPlan& PsiExecutor::last_plan() const { return st_->plan; }

const ExecCounters& PsiExecutor::exec_counters() const { return st_->counters; }

std::int64_t PsiExecutor::row_tile() const { return st_->row_tile; }

double PsiExecutor::last_preload_seconds() const { return st_->preload_seconds; }

double PsiExecutor::last_block_seconds() const { return st_->block_seconds; }

std::uint64_t PsiExecutor::resident_bytes() const { return st_->resident ? st_->resident->resident_bytes() : 0; }

BlockPlan plan_block(const model::ModelConfig& c, const model::NumericsVariant& v, const Schedule& s,
                     const ArenaSettings& a, const BlockShapes& shapes, std::int64_t row_tile, int index) {
  return plan_of(c, v, s, rt::ArenaLayout::make(a.arena, a.page, a.workspace), shapes, row_tile_of(c, row_tile), index,
                 0);
}

std::uint64_t declared_live(const model::ModelConfig& c, const model::NumericsVariant& v, const Schedule& s,
                            const ArenaSettings& a, const BlockShapes& shapes, std::int64_t row_tile) {
  return declared(c, v, s, rt::ArenaLayout::make(a.arena, a.page, a.workspace), shapes, row_tile_of(c, row_tile))
      .first;
}

std::int64_t fitting_row_tile(const model::ModelConfig& c, const model::NumericsVariant& v,
                              const std::vector<Schedule>& schedules, const ArenaSettings& a,
                              const BlockShapes& shapes) {
  if (v.attention != ops::SoftmaxForm::online) return default_row_tile(c);
  const rt::ArenaLayout layout = rt::ArenaLayout::make(a.arena, a.page, a.workspace);
  const std::int64_t step = v.key_tile;
  const std::int64_t most = std::max({shapes.video.tokens, shapes.audio.tokens, step});
  std::int64_t best = 0;
  for (std::int64_t r = step; r < most + step; r += step) {
    bool fits = true;
    for (const Schedule& s : schedules) {
      fits = declared(c, v, s, layout, shapes, r).first <= layout.scratch &&
             plan_of(c, v, s, layout, shapes, r, 0, 0).outcome == rt::Outcome::complete;
      if (!fits) break;
    }
    if (fits) best = r;
  }
  if (best == 0)
    throw Error("no row tile fits arena " + a.label + ": not even one key tile of " + std::to_string(step) +
                " rows (" + v.name + ")");
  return best;
}

BlockRun run_block(const model::ModelConfig& c, const ckpt::WeightSource& w, int index, const model::BlockInputs& in,
                   const model::NumericsVariant& v, const Schedule& s, const ArenaSettings& a, const ExecOptions& o) {
  BlockRun r;
  const auto t0 = std::chrono::steady_clock::now();
  PsiExecutor ex(c, w, v, s, a, o);
  try {
    r.probes = ex.run_block(index, in);
    r.report = ex.finish();
    r.preload_seconds = ex.last_preload_seconds();
    r.block_seconds = ex.last_block_seconds();
  } catch (const rt::RunFailure& f) {
    r.outcome = f.outcome();
    r.failure = f.what();
    if (ex.has_runtime()) r.report = ex.report();
    r.report.outcome = f.outcome();
  }
  r.wall_seconds = seconds_since(t0);
  r.plan = ex.last_plan();
  r.exec = ex.exec_counters();
  return r;
}

}  // namespace psi::exec
