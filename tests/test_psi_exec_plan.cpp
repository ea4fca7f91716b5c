// The PSI executor's plan at full size, from shapes alone (no tensor, no arithmetic): the
// ltx2-22b block at the paper's stage-2 token counts (4,928 video, 126 audio tokens; one-token
// and 1,024-row text contexts) fits the default 80 MiB / 8 MiB arena (S_live + W + 2P <= 80
// MiB) with a live set that does not grow with the token count, and the paper's capacity
// settings end as the paper's Table V: 48 MiB exhausts the scratch, 64/80/96 MiB complete, the
// 4 MiB page cannot hold a 1,024-channel FFN tile, 96 MiB with 16 MiB pages completes.
#include <gtest/gtest.h>

#include "tests/test_psi_exec_support.h"

using namespace psi_exec_test;

namespace {

constexpr std::uint64_t kMiB = 1 << 20;

const model::ModelConfig& full_size() {
  static const model::ModelConfig c = model::model_config("ltx2-22b");
  return c;
}

exec::BlockShapes stage2(std::int64_t context) {
  return exec::block_shapes(full_size(), exec::TokenCounts{.video = 4928, .audio = 126, .context = context});
}

}  // namespace

TEST(PsiExecPlan, FullSizeBlockFitsTheDefaultArena) {
  const model::ModelConfig& c = full_size();
  const exec::ArenaSettings a = exec::default_arena(c);
  // The peak: a video self-attention query row tile (R = 1,024 tokens) while its input is made:
  // gate logits [R, 32], q [R, 4096], x -> h, and the per-token shift and scale [R, 4096].
  const std::uint64_t R = 1024, D = 4096, H = 32;
  const std::uint64_t peak = R * H * 2 + 4 * R * D * 2;
  EXPECT_EQ(peak, 33619968u);
  for (std::int64_t context : {1, 1024})
    for (const char* variant : {"baseline", "modified"})
      for (const exec::Schedule& s : exec::schedules()) {
        const std::string where = std::string(variant) + " " + s.name + " context " + std::to_string(context);
        const auto& v = model::numerics_variant(variant);
        const exec::BlockPlan p = exec::plan_block(c, v, s, a, stage2(context));
        EXPECT_EQ(p.outcome, rt::Outcome::complete) << where << ": " << p.failure;
        EXPECT_EQ(p.scratch_bytes, peak) << where;
        EXPECT_EQ(p.scratch_peak_at, "video.attn1 ada scale tile 0") << where;
        EXPECT_EQ(p.workspace_bytes, 2 * kMiB) << where;  // the [R, 1,024] FFN hidden tile
        EXPECT_LE(p.scratch_bytes + std::uint64_t(a.workspace + 2 * a.page), 80 * kMiB) << where;
        EXPECT_EQ(exec::declared_live(c, v, s, a, stage2(context)), p.scratch_bytes) << where;
        EXPECT_EQ(p.largest_commit, R * D * 2) << where;
      }
}

TEST(PsiExecPlan, LiveSetDoesNotGrowWithTheTokenCount) {
  // Stage 1 (1,232 video tokens) and stage 2 (4,928): the same declared S_live, so one
  // executor serves both; a per-batch-timestep block of either needs less.
  const model::ModelConfig& c = full_size();
  const exec::ArenaSettings a = exec::default_arena(c);
  const auto& v = model::numerics_variant("baseline");
  const exec::Schedule& s = exec::schedule("reuse+prefetch");
  const exec::BlockShapes stage1 = exec::block_shapes(c, exec::TokenCounts{.video = 1232, .audio = 126, .context = 1024});
  EXPECT_EQ(exec::declared_live(c, v, s, a, stage1), exec::declared_live(c, v, s, a, stage2(1)));
  EXPECT_EQ(exec::plan_block(c, v, s, a, stage1).scratch_bytes, exec::plan_block(c, v, s, a, stage2(1)).scratch_bytes);
  const exec::BlockShapes per_batch =
      exec::block_shapes(c, exec::TokenCounts{.video = 4928, .audio = 126, .context = 1, .per_token_timesteps = false});
  EXPECT_LT(exec::plan_block(c, v, s, a, per_batch).scratch_bytes, exec::declared_live(c, v, s, a, stage2(1)));
}

TEST(PsiExecPlan, CapacityPatternAtFullSize) {
  const model::ModelConfig& c = full_size();
  using O = rt::Outcome;
  const O want[] = {O::scratch_exhausted, O::complete, O::complete, O::complete, O::tile_exceeds_page, O::complete};
  const auto settings = exec::capacity_settings(c);
  ASSERT_EQ(settings.size(), 6u);
  for (std::int64_t context : {1, 1024})
    for (const char* variant : {"baseline", "modified"})
      for (std::size_t i = 0; i < settings.size(); ++i) {
        const exec::BlockPlan p = exec::plan_block(c, model::numerics_variant(variant), exec::schedule("reuse+prefetch"),
                                                   settings[i], stage2(context));
        EXPECT_EQ(p.outcome, want[i]) << settings[i].label << " " << variant << " context " << context << ": " << p.failure;
      }
  const auto& v = model::numerics_variant("baseline");
  // 48 MiB: 24 MiB of scratch; the query row tile needs 32 MiB.
  EXPECT_EQ(exec::plan_block(c, v, exec::schedule("baseline"), settings[0], stage2(1024)).failure,
            "video.attn1 ada shift tile 0");
  EXPECT_EQ(exec::plan_block(c, v, exec::schedule("baseline"), settings[4], stage2(1024)).failure,
            "video.ff.up tile 0 (transformer_blocks.0.ff.net.0.proj.weight rows [0, 1024) cols [0, 4096))");
}
