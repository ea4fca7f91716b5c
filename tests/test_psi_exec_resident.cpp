// Host-resident weights (runtime/resident_weights.h): the pages filled straight from pinned
// host memory give the very bits the staged fills give, under every schedule, in validate mode
// and under chaos; each distinct tile is held once; a trajectory of blocks reuses the buffer.
#include <gtest/gtest.h>

#include <set>
#include <tuple>

#include "tests/test_psi_exec_support.h"

namespace psi_exec_test {
namespace {

pipeline::SyntheticShape two_row_tiles() {
  return {.frames = 2, .height = 6, .width = 6, .audio_tokens = 20, .context_rows = 40};
}

exec::BlockRun run(const BlockCase& bc, const std::string& schedule, const exec::ExecOptions& o) {
  return exec::run_block(bc.config, *bc.weights, bc.index, bc.inputs, model::numerics_variant("baseline"),
                         exec::schedule(schedule), exec::default_arena(bc.config), o);
}

std::uint64_t distinct_bytes(const exec::BlockPlan& p) {
  std::set<std::tuple<std::string, std::int64_t, std::int64_t, std::int64_t, std::int64_t>> seen;
  std::uint64_t total = 0;
  for (const auto& w : p.tiles)
    if (seen.insert({w.tensor, w.slice.r0, w.slice.r1, w.slice.c0, w.slice.c1}).second) total += w.bytes();
  return total;
}

TEST(PsiExecResident, EveryScheduleGivesTheStagedBits) {
  const BlockCase bc("tiny", "ltx25", two_row_tiles());
  const model::BlockTaps want = bc.reference(model::numerics_variant("baseline"));
  for (const auto& s : exec::schedules()) {
    const exec::BlockRun staged = run(bc, s.name, {});
    const exec::BlockRun resident = run(bc, s.name, {.resident_weights = true});
    ASSERT_EQ(staged.outcome, rt::Outcome::complete) << staged.failure;
    ASSERT_EQ(resident.outcome, rt::Outcome::complete) << resident.failure;
    expect_bitwise(resident.probes, want, s.name + " resident");
    expect_bitwise(staged.probes, want, s.name + " staged");
    EXPECT_EQ(resident.report.counters.weight_tiles, staged.report.counters.weight_tiles) << s.name;
    EXPECT_EQ(staged.preload_seconds, 0.0);
    EXPECT_GT(resident.preload_seconds, 0.0);
    EXPECT_GT(resident.block_seconds, 0.0);
    EXPECT_LE(resident.block_seconds + resident.preload_seconds, resident.wall_seconds);
  }
}

TEST(PsiExecResident, ValidateModeAndChaosFindNothingMissing) {
  const BlockCase bc("tiny", "ltx25", two_row_tiles());
  const model::BlockTaps want = bc.reference(model::numerics_variant("baseline"));
  for (std::uint64_t seed : {3u, 11u}) {
    const exec::BlockRun r =
        run(bc, "reuse+prefetch", {.validate = true, .chaos_seed = seed, .resident_weights = true});
    ASSERT_EQ(r.outcome, rt::Outcome::complete) << r.failure;
    expect_bitwise(r.probes, want, "chaos seed " + std::to_string(seed));
  }
}

TEST(PsiExecResident, EachDistinctTileIsHeldOnceAndTheBufferIsReused) {
  // Two row tiles stream the block's weights twice: the resident set is the distinct tiles.
  const BlockCase b0("tiny", "ltx25", two_row_tiles(), 0);
  const BlockCase b1("tiny", "ltx25", two_row_tiles(), 1);
  exec::PsiExecutor ex(b0.config, *b0.weights, model::numerics_variant("baseline"), exec::schedule("reuse+prefetch"),
                       exec::default_arena(b0.config), {.resident_weights = true});
  expect_bitwise(ex.run_block(0, b0.inputs), b0.reference(model::numerics_variant("baseline")), "block 0");
  const exec::BlockPlan& plan = ex.last_plan();
  EXPECT_EQ(ex.resident_bytes(), distinct_bytes(plan));
  EXPECT_LT(ex.resident_bytes(), plan.weight_bytes);
  const std::uint64_t pinned_after_first = ex.report().pinned_allocations;
  expect_bitwise(ex.run_block(1, b1.inputs), b1.reference(model::numerics_variant("baseline")), "block 1");
  EXPECT_EQ(ex.resident_bytes(), distinct_bytes(ex.last_plan()));
  // Blocks of one config have the same tiles' sizes: no second pinned allocation.
  EXPECT_EQ(ex.report().pinned_allocations, pinned_after_first);
  ex.finish();
}

}  // namespace
}  // namespace psi_exec_test
