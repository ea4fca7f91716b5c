#pragma once
// The PSI executor: LTX-2.x AV blocks run as partitioned operators on psi::rt::Runtime, inside
// one fixed arena (two weight pages, workspace, scratch), with every weight tile streamed
// through the pages, every per-token operator run on token row tiles, attention run per query
// row tile over key blocks streamed back from the journal, and the BF16 state between
// operators kept in the host journal as row tiles.
//
// For a block, the executor first PLANS it (block_program.h on a planning Driver, from shapes
// alone): the weight tiles in consumption order and the scratch/workspace stacks of the exact
// allocation sequence. Then it runs the same program on the runtime.
//
// The runtime is made at the first run_block. Its declared S_live is the scratch high water of
// the FULL-TILE plan of that block's config (full_tile_shapes: every row tile and key block
// full, per-token timesteps), which bounds the live set of every block whatever its token
// counts, so one executor serves every block of a trajectory (stage 1 and stage 2 alike), and
// the bound check S_live + W + 2P + eps (eps = 0: the plan uses the runtime's own rounding)
// >= measured peak is a real check of the plan. The dense variant's MATH attention holds a
// block's whole k and v, whose size no full-tile plan bounds: for it the whole scratch is
// declared. When the full-tile plan does not fit the arena's scratch, the whole scratch is
// declared and a block fails where its live set outgrows it (scratch_exhausted, naming the
// operator and tile).
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/checkpoint/weight_source.h"
#include "engine/exec/arena_settings.h"
#include "engine/exec/block_program.h"
#include "engine/exec/driver.h"
#include "engine/exec/schedule.h"
#include "engine/model/block.h"
#include "engine/model/config.h"
#include "engine/model/variant.h"
#include "engine/runtime/runtime.h"

namespace psi::exec {

struct ExecOptions {
  std::string backend = "cpu";  // a request: cpu | cuda | auto (rt::check_backend_request; the runtime resolves it)
  bool validate = false;
  std::optional<std::uint64_t> chaos_seed = std::nullopt;
  rt::Fault fault = rt::Fault::none;  // test-only: drop one dependency
  std::int64_t row_tile = 0;          // token rows per row tile; 0: default_row_tile(config)
  // Before each block, read its weight tiles once into pinned host memory and fill the pages
  // straight from there (runtime/resident_weights.h), so the block's time is transport and
  // arithmetic, not the weight source.
  bool resident_weights = false;
  // The fixed budget's cap on a backend without a device pool (rt::RuntimeConfig::memory_cap).
  std::optional<std::uint64_t> memory_cap;
};

// One runtime (one arena allocation) for many blocks: a whole model invocation or trajectory.
// `weights` is read while blocks run and must outlive the executor.
class PsiExecutor {
 public:
  PsiExecutor(const model::ModelConfig& c, const ckpt::WeightSource& weights, const model::NumericsVariant& v,
              const Schedule& s, const ArenaSettings& a, const ExecOptions& o);
  ~PsiExecutor();
  PsiExecutor(const PsiExecutor&) = delete;
  PsiExecutor& operator=(const PsiExecutor&) = delete;

  // Runs block `index` (weights transformer_blocks.<index>.*). Throws rt::RunFailure on resource
  // outcomes; after any failure the executor refuses further blocks.
  model::BlockTaps run_block(int index, const model::BlockInputs& in);
  // Drains, checks one device allocation and the bound (Runtime::finish).
  rt::RunReport finish();
  // A snapshot of the run so far.
  rt::RunReport report() const;
  // The runtime (made by the first run_block; a psi::Error before).
  rt::Runtime& runtime();
  bool has_runtime() const;

  // The plan of the last block run (tiles, its own scratch and workspace high water).
  const BlockPlan& last_plan() const;
  const ExecCounters& exec_counters() const;
  // Token rows per row tile.
  std::int64_t row_tile() const;
  // Seconds the last block spent making its weights host-resident (0 without resident_weights),
  // and the bytes held.
  double last_preload_seconds() const;
  // Seconds of the last block from its inputs' journaling to its probes collected (its work
  // drained): runtime set-up, planning and preloading excluded.
  double last_block_seconds() const;
  std::uint64_t resident_bytes() const;

 private:
  struct State;
  std::unique_ptr<State> st_;
};

struct BlockRun {
  rt::Outcome outcome = rt::Outcome::complete;
  std::string failure;        // the RunFailure message when not complete
  model::BlockTaps probes;  // when complete
  rt::RunReport report;
  double wall_seconds = 0;     // everything: runtime set-up, preload, block, drain
  double preload_seconds = 0;  // making the weights host-resident (resident_weights)
  double block_seconds = 0;    // PsiExecutor::last_block_seconds
  BlockPlan plan;             // the block's own plan (report.live_bytes is the declared S_live)
  ExecCounters exec;
};

// The plan of one block of these shapes in arena a (planning only: no tensor, no arithmetic,
// no runtime). row_tile 0: default_row_tile(c).
BlockPlan plan_block(const model::ModelConfig& c, const model::NumericsVariant& v, const Schedule& s,
                     const ArenaSettings& a, const BlockShapes& shapes, std::int64_t row_tile = 0, int index = 0);

// The S_live an executor declares for blocks of this config (see above), before capping it to
// the arena's scratch.
std::uint64_t declared_live(const model::ModelConfig& c, const model::NumericsVariant& v, const Schedule& s,
                            const ArenaSettings& a, const BlockShapes& shapes, std::int64_t row_tile = 0);

// The largest row tile (a multiple of the variant's key tile, at most the block's largest token
// count) whose declared S_live fits the arena's scratch and whose plan of these shapes completes
// under every schedule in `schedules`: fewer row tiles stream the block's weights fewer times.
// psi::Error when not even one key tile fits. The dense (MATH) variant declares the whole
// scratch whatever the row tile, so for it the default row tile is returned.
std::int64_t fitting_row_tile(const model::ModelConfig& c, const model::NumericsVariant& v,
                              const std::vector<Schedule>& schedules, const ArenaSettings& a,
                              const BlockShapes& shapes);

// One block in its own runtime; resource failures are returned as outcomes, never thrown.
BlockRun run_block(const model::ModelConfig& c, const ckpt::WeightSource& w, int index, const model::BlockInputs& in,
                   const model::NumericsVariant& v, const Schedule& s, const ArenaSettings& a, const ExecOptions& o);

}  // namespace psi::exec
