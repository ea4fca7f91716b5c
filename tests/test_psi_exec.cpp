// PSI executor arithmetic: the ten probes of a block run on the runtime (weights through the
// pages, state through the journal as token row tiles, attention over key blocks streamed from
// the journal) are bitwise equal to model::block_forward on the same weights and inputs, for
// every variant under every schedule, both feature profiles, on the tiny and small configs,
// with row tiles that divide the token counts and row tiles that do not.
#include <gtest/gtest.h>

#include "engine/parallel.h"
#include "tests/test_psi_exec_support.h"

using namespace psi_exec_test;

namespace {

pipeline::SyntheticShape tiny_shape() { return {.frames = 2, .height = 4, .width = 4, .audio_tokens = 12, .context_rows = 9}; }
pipeline::SyntheticShape small_shape() { return {.frames = 2, .height = 4, .width = 6, .audio_tokens = 20, .context_rows = 16}; }

void expect_every_schedule_matches(const BlockCase& bc, const std::string& variant, std::int64_t row_tile = 0) {
  const auto& v = model::numerics_variant(variant);
  const model::BlockTaps want = bc.reference(v);
  for (const exec::Schedule& s : exec::schedules()) {
    exec::ExecOptions o;
    o.row_tile = row_tile;
    const exec::BlockRun r =
        exec::run_block(bc.config, *bc.weights, bc.index, bc.inputs, v, s, exec::default_arena(bc.config), o);
    const std::string where = bc.config.name + "/" + bc.config.features.profile + " " + variant + " " + s.name +
                              " row tile " + std::to_string(row_tile);
    ASSERT_EQ(r.outcome, rt::Outcome::complete) << where << ": " << r.failure;
    expect_bitwise(r.probes, want, where);
  }
}

// Tiny with 72 video tokens (2 x 6 x 6), 20 audio tokens, 40 context rows.
pipeline::SyntheticShape tiny_72() { return {.frames = 2, .height = 6, .width = 6, .audio_tokens = 20, .context_rows = 40}; }
// Tiny with 288 video tokens (2 x 12 x 12; the tiny trajectory's stage-2 count).
pipeline::SyntheticShape tiny_288() { return {.frames = 2, .height = 12, .width = 12, .audio_tokens = 20, .context_rows = 9}; }

}  // namespace

TEST(PsiExec, TinyBaselineUnderEverySchedule) { expect_every_schedule_matches(BlockCase("tiny", "ltx25", tiny_shape()), "baseline"); }

TEST(PsiExec, TinyModifiedUnderEverySchedule) { expect_every_schedule_matches(BlockCase("tiny", "ltx25", tiny_shape()), "modified"); }

TEST(PsiExec, TinyDenseUnderEverySchedule) { expect_every_schedule_matches(BlockCase("tiny", "ltx25", tiny_shape()), "dense"); }

TEST(PsiExec, SecondBlockOfTinyUsesItsOwnWeights) {
  expect_every_schedule_matches(BlockCase("tiny", "ltx25", tiny_shape(), 1), "modified");
}

TEST(PsiExec, Ltx2ProfileWithoutGatesOrTextAdaLn) {
  expect_every_schedule_matches(BlockCase("tiny", "ltx2", tiny_shape()), "baseline");
}

TEST(PsiExec, PromptTablesWithoutPromptTimestep) {
  pipeline::SyntheticShape s = tiny_shape();
  s.prompt_timestep = false;
  expect_every_schedule_matches(BlockCase("tiny", "ltx25", s), "modified");
}

TEST(PsiExec, PerTokenTimesteps) {
  pipeline::SyntheticShape s = tiny_shape();
  s.per_token_timesteps = true;
  expect_every_schedule_matches(BlockCase("tiny", "ltx25", s), "baseline");
}

TEST(PsiExec, SmallBaselineAndModifiedUnderEverySchedule) {
  const BlockCase bc("small", "ltx25", small_shape());
  expect_every_schedule_matches(bc, "baseline");
  expect_every_schedule_matches(bc, "modified");
}

TEST(PsiExec, RowTilesThatDoNotDivideTheTokens) {
  // 72 tokens in tiles of 16 (4 + 8 rows), 48 (48 + 24) and 64 (64 + 8): key pieces of 16 rows
  // (gcd with the 128-key tile), a key block made of several pieces or of one short piece.
  const BlockCase bc("tiny", "ltx25", tiny_72());
  for (std::int64_t rows : {16, 48, 64}) {
    expect_every_schedule_matches(bc, "baseline", rows);
    expect_every_schedule_matches(bc, "modified", rows);
  }
}

TEST(PsiExec, RowTilesOverSeveralKeyBlocks) {
  // 288 tokens: three 128-key blocks (the last of 32 keys); row tiles of 128 (one piece per
  // block) and 96 (pieces of 32 rows, a block across two row tiles).
  const BlockCase bc("tiny", "ltx25", tiny_288());
  for (std::int64_t rows : {96, 128}) {
    expect_every_schedule_matches(bc, "baseline", rows);
    expect_every_schedule_matches(bc, "modified", rows);
  }
}

TEST(PsiExec, SmallRowTilesAndTheDenseVariant) {
  const BlockCase bc("small", "ltx25", {.frames = 2, .height = 6, .width = 12, .audio_tokens = 40, .context_rows = 33});
  expect_every_schedule_matches(bc, "baseline", 40);
  expect_every_schedule_matches(bc, "modified", 40);
  // MATH attention: each query row tile sees the whole k and v.
  expect_every_schedule_matches(bc, "dense", 40);
}

TEST(PsiExec, TheComparisonSeesTheVariant) {
  // The bitwise checks above mean something only if the variants' arithmetic differs on these
  // inputs: the executor's modified block must differ from the host baseline block.
  const BlockCase bc("tiny", "ltx25", tiny_shape());
  const exec::BlockRun r = exec::run_block(bc.config, *bc.weights, bc.index, bc.inputs, model::numerics_variant("modified"),
                                           exec::schedule("reuse+prefetch"), exec::default_arena(bc.config), {});
  ASSERT_EQ(r.outcome, rt::Outcome::complete) << r.failure;
  const model::BlockTaps base = bc.reference(model::numerics_variant("baseline"));
  int differing = 0;
  const auto g = r.probes.named();
  const auto w = base.named();
  for (std::size_t i = 0; i < g.size(); ++i) differing += g[i].second->data != w[i].second->data;
  EXPECT_GT(differing, 0);
}

TEST(PsiExec, IndependentOfTheThreadCount) {
  const BlockCase bc("tiny", "ltx25", tiny_shape());
  const auto& v = model::numerics_variant("baseline");
  const model::BlockTaps want = bc.reference(v);
  for (int threads : {1, 3}) {
    psi::set_thread_count(threads);
    const exec::BlockRun r = exec::run_block(bc.config, *bc.weights, bc.index, bc.inputs, v, exec::schedule("reuse+prefetch"),
                                             exec::default_arena(bc.config), {});
    psi::set_thread_count(0);
    ASSERT_EQ(r.outcome, rt::Outcome::complete) << r.failure;
    expect_bitwise(r.probes, want, std::to_string(threads) + " threads");
  }
}
