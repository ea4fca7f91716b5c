// PSI executor resources: schedules, arena settings and the row-tile rule; the declared S_live
// (the full-tile plan's, the same whatever the token count) against the run's scratch high
// water (exactly the block's own plan) and the measured peak; one device allocation; planned
// and measured outcomes as the arena shrinks on `small`; the counters' directions between
// schedules (with the exact amounts the row and hidden tiles imply); a model invocation and a
// stage-1 then stage-2 block in one arena.
#include <gtest/gtest.h>

#include <regex>

#include "engine/backend/backend_factory.h"
#include "engine/exec/tiling.h"
#include "engine/pipeline/trajectory.h"
#include "tests/test_psi_exec_support.h"

using namespace psi_exec_test;

namespace {

constexpr std::int64_t kMiB = 1 << 20;

pipeline::SyntheticShape tiny_shape() { return {.frames = 2, .height = 4, .width = 4, .audio_tokens = 12, .context_rows = 9}; }
// Two video row tiles (72 = 64 + 8 at the tiny default of 64 rows).
pipeline::SyntheticShape tiny_72() { return {.frames = 2, .height = 6, .width = 6, .audio_tokens = 20, .context_rows = 40}; }
// Four video row tiles at small's default of 128 rows (448 = 3 x 128 + 64).
pipeline::SyntheticShape capacity_shape() {
  return {.frames = 2, .height = 14, .width = 16, .audio_tokens = 64, .context_rows = 32};
}

exec::BlockRun run(const BlockCase& bc, const std::string& schedule, const exec::ArenaSettings& a,
                   const exec::ExecOptions& o = {}) {
  return exec::run_block(bc.config, *bc.weights, bc.index, bc.inputs, model::numerics_variant("baseline"),
                         exec::schedule(schedule), a, o);
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "no error";
}

struct StreamFfn {
  std::int64_t tokens, dim, hidden, row_tiles;
  exec::FfnGeometry g;
};

std::vector<StreamFfn> ffn_streams(const BlockCase& bc, std::uint64_t page, std::int64_t rows) {
  const model::ModelConfig& c = bc.config;
  const auto& v = model::numerics_variant("baseline");
  const std::int64_t nv = bc.inputs.video.x.dim(1), na = bc.inputs.audio.x.dim(1);
  return {{nv, c.video_dim(), c.video_hidden(), exec::RowTiles{nv, rows}.count(),
           exec::ffn_geometry(c, v, c.video_hidden(), c.video_dim(), page)},
          {na, c.audio_dim(), c.audio_hidden(), exec::RowTiles{na, rows}.count(),
           exec::ffn_geometry(c, v, c.audio_hidden(), c.audio_dim(), page)}};
}

std::uint64_t aligned(std::uint64_t bytes) { return (bytes + 255) / 256 * 256; }

}  // namespace

TEST(PsiExecSettings, SchedulesInTableOrder) {
  std::vector<std::string> names;
  for (const auto& s : exec::schedules()) names.push_back(s.name);
  EXPECT_EQ(names, (std::vector<std::string>{"baseline", "ffn-reuse", "reuse+async-journal", "reuse+prefetch"}));
  EXPECT_EQ(exec::schedule("baseline").ffn, psi::ops::FfnSchedule::recompute);
  EXPECT_EQ(exec::schedule("ffn-reuse").ffn, psi::ops::FfnSchedule::reuse);
  EXPECT_EQ(exec::schedule("ffn-reuse").journal, rt::JournalTransportKind::sync);
  EXPECT_EQ(exec::schedule("reuse+async-journal").journal, rt::JournalTransportKind::async);
  EXPECT_EQ(exec::schedule("reuse+async-journal").copies, rt::CopySchedule::on_compute);
  EXPECT_EQ(exec::schedule("reuse+prefetch").journal, rt::JournalTransportKind::async);
  EXPECT_EQ(exec::schedule("reuse+prefetch").copies, rt::CopySchedule::prefetch);
  EXPECT_EQ(error_of([] { exec::schedule("fast"); }),
            "unknown PSI schedule 'fast' (known: baseline, ffn-reuse, reuse+async-journal, reuse+prefetch)");
}

TEST(PsiExecSettings, ArenaScalesByTheFfnTile) {
  const exec::ArenaSettings full = exec::default_arena(model::model_config("ltx2-22b"));
  EXPECT_EQ(full.label, "80 MiB / 8 MiB");
  EXPECT_EQ(full.arena, 80 * kMiB);
  EXPECT_EQ(full.page, 8 * kMiB);
  EXPECT_EQ(full.workspace, 8 * kMiB);
  const exec::ArenaSettings small = exec::default_arena(model::model_config("small"));
  EXPECT_EQ(small.label, "80 MiB / 8 MiB (scaled: 10 MiB / 1 MiB)");
  EXPECT_EQ(small.page, exec::ffn_tile_bytes(model::model_config("small")));  // one FFN tile per page, as at full size
  EXPECT_EQ(small.workspace, kMiB);
  EXPECT_EQ(exec::default_arena(model::model_config("tiny")).label, "80 MiB / 8 MiB (scaled: 5 MiB / 512 KiB)");
  std::vector<std::string> labels;
  for (const auto& a : exec::capacity_settings(model::model_config("small"))) labels.push_back(a.label);
  EXPECT_EQ(labels, (std::vector<std::string>{"48 MiB / 8 MiB (scaled: 6 MiB / 1 MiB)", "64 MiB / 8 MiB (scaled: 8 MiB / 1 MiB)",
                                              "80 MiB / 8 MiB (scaled: 10 MiB / 1 MiB)", "96 MiB / 8 MiB (scaled: 12 MiB / 1 MiB)",
                                              "80 MiB / 4 MiB (scaled: 10 MiB / 512 KiB)", "96 MiB / 16 MiB (scaled: 12 MiB / 2 MiB)"}));
}

TEST(PsiExecSettings, RowTileScalesLikeTheArena) {
  EXPECT_EQ(exec::default_row_tile(model::model_config("ltx2-22b")), 1024);
  EXPECT_EQ(exec::default_row_tile(model::model_config("small")), 128);
  EXPECT_EQ(exec::default_row_tile(model::model_config("tiny")), 64);
  const BlockCase bc("tiny", "ltx25", tiny_shape());
  exec::ExecOptions o;
  EXPECT_EQ(exec::PsiExecutor(bc.config, *bc.weights, model::numerics_variant("baseline"), exec::schedule("baseline"),
                              exec::default_arena(bc.config), o)
                .row_tile(),
            64);
  o.row_tile = -3;
  EXPECT_EQ(error_of([&] {
              exec::PsiExecutor(bc.config, *bc.weights, model::numerics_variant("baseline"), exec::schedule("baseline"),
                                exec::default_arena(bc.config), o);
            }),
            "PSI executor: row tile -3 must be positive (0: the default)");
}

TEST(PsiExecSettings, BackendNamesAndCudaWithoutADevice) {
  const BlockCase bc("tiny", "ltx25", tiny_shape());
  const auto& v = model::numerics_variant("baseline");
  const auto make = [&](const std::string& backend) {
    exec::PsiExecutor ex(bc.config, *bc.weights, v, exec::schedule("baseline"), exec::default_arena(bc.config),
                         {.backend = backend});
  };
  EXPECT_EQ(error_of([&] { make("gpu"); }), "backend \"gpu\" is not one of auto, cpu, cuda");
  std::string why;
  const bool device = rt::cuda_devices(&why) > 0;
  const exec::BlockRun a = run(bc, "baseline", exec::default_arena(bc.config), {.backend = "auto"});
  ASSERT_EQ(a.outcome, rt::Outcome::complete) << a.failure;
  EXPECT_EQ(a.report.backend, device ? "cuda" : "cpu");
  if (device) GTEST_SKIP() << "a CUDA device is present: test_cuda_kernels and the device check cover backend cuda";
  // The runtime, made by the first block, is where the backend is chosen.
  const std::string e = error_of([&] { run(bc, "baseline", exec::default_arena(bc.config), {.backend = "cuda"}); });
  EXPECT_TRUE(e.starts_with("backend cuda requested but ")) << e;
}

TEST(PsiExecResources, DeclaredLiveSetBoundsThePlannedAndMeasuredOnes) {
  const BlockCase bc("tiny", "ltx25", tiny_72());
  const exec::ArenaSettings a = exec::default_arena(bc.config);
  const auto& v = model::numerics_variant("baseline");
  const model::ModelConfig& c = bc.config;
  // The full-tile plan's peak: the video self-attention's key-block loop with one query tile
  // (R = 64 rows) — gate logits [R, H], q [R, inner], the float32 accumulator, running max and
  // sum [R, H] — and one 128-key block of k and v.
  const std::uint64_t R = 64, H = std::uint64_t(c.video_heads), inner = std::uint64_t(c.video_dim()), KT = 128;
  const std::uint64_t full = aligned(R * H * 2) + aligned(R * inner * 2) + aligned(R * inner * 4) + 2 * aligned(R * H * 4) +
                             2 * aligned(KT * inner * 2);
  for (const exec::Schedule& s : exec::schedules()) {
    const exec::BlockRun r = run(bc, s.name, a);
    ASSERT_EQ(r.outcome, rt::Outcome::complete) << s.name << ": " << r.failure;
    const rt::RunReport& rep = r.report;
    EXPECT_EQ(rep.device_allocations, 1u) << s.name;
    EXPECT_EQ(rep.live_bytes, exec::declared_live(c, v, s, a, exec::block_shapes(c, bc.inputs))) << s.name;
    EXPECT_EQ(rep.live_bytes, full) << s.name;
    EXPECT_EQ(rep.eps_bytes, 0u) << s.name;
    EXPECT_EQ(rep.scratch_high_water, r.plan.scratch_bytes) << s.name;  // the plan is the run's allocation sequence
    EXPECT_LE(r.plan.scratch_bytes, rep.live_bytes) << s.name;
    EXPECT_EQ(rep.workspace_high_water, r.plan.workspace_bytes) << s.name;
    EXPECT_EQ(rep.bound, rep.live_bytes + std::uint64_t(a.workspace + 2 * a.page)) << s.name;
    EXPECT_LE(rep.peak, rep.bound) << s.name;
    EXPECT_GT(rep.peak, std::uint64_t(2 * a.page) + r.plan.scratch_bytes / 2) << s.name;
    EXPECT_EQ(rep.counters.weight_tiles, r.plan.tiles.size()) << s.name;
    EXPECT_EQ(rep.counters.h2d(rt::CopyKind::weights), r.plan.weight_bytes) << s.name;
    EXPECT_EQ(r.plan.outcome, rt::Outcome::complete) << s.name;
  }
  // The declared live set does not grow with the token count (planning only).
  for (std::int64_t n : {1, 72, 288, 1232}) {
    const exec::BlockShapes sh = exec::block_shapes(c, exec::TokenCounts{.video = n, .audio = n, .context = n});
    EXPECT_EQ(exec::declared_live(c, v, exec::schedule("reuse+prefetch"), a, sh), full) << n << " tokens";
    EXPECT_LE(exec::plan_block(c, v, exec::schedule("reuse+prefetch"), a, sh).scratch_bytes, full) << n << " tokens";
  }
  EXPECT_EQ(exec::plan_block(c, v, exec::schedule("baseline"), a,
                             exec::block_shapes(c, exec::TokenCounts{.video = 288, .audio = 18, .context = 1}))
                .scratch_peak_at,
            "video.attn1 key block v tile 0");
}

TEST(PsiExecResources, OutcomesAsTheArenaShrinksOnSmall) {
  // The paper's six settings and two smaller arenas (scaled): each run ends as its plan says;
  // completed ones are bitwise equal to block_forward.
  const BlockCase bc("small", "ltx25", capacity_shape());
  std::vector<exec::ArenaSettings> settings = exec::capacity_settings(bc.config);
  settings.push_back(exec::arena_setting(bc.config, 32 * kMiB, 8 * kMiB));
  settings.push_back(exec::arena_setting(bc.config, 28 * kMiB, 8 * kMiB));
  using O = rt::Outcome;
  const O want[] = {O::complete,          O::complete, O::complete, O::complete, O::tile_exceeds_page,
                    O::complete,          O::complete, O::scratch_exhausted};
  const model::BlockTaps ref = bc.reference(model::numerics_variant("baseline"));
  for (std::size_t i = 0; i < settings.size(); ++i) {
    const exec::BlockRun r = run(bc, "reuse+prefetch", settings[i]);
    EXPECT_EQ(r.outcome, want[i]) << settings[i].label << ": " << r.failure;
    EXPECT_EQ(r.plan.outcome, r.outcome) << settings[i].label << ": planned " << r.plan.failure;
    EXPECT_EQ(r.report.outcome, r.outcome) << settings[i].label;
    if (r.outcome == rt::Outcome::complete) {
      expect_bitwise(r.probes, ref, settings[i].label);
      EXPECT_LE(r.report.peak, r.report.bound) << settings[i].label;
      EXPECT_EQ(r.report.device_allocations, 1u) << settings[i].label;
    }
  }
  const exec::BlockRun low = run(bc, "reuse+prefetch", settings.back());
  EXPECT_EQ(low.report.live_bytes, low.report.layout.scratch);  // the full-tile plan does not fit: all of it
  EXPECT_EQ(low.plan.failure, "video.attn1 key block k tile 0");
  EXPECT_TRUE(std::regex_match(low.failure,
                               std::regex(R"(scratch exhausted: video\.attn1 key block k tile 0 needs 128\.0 KiB, [0-9.]+ KiB free of 512 KiB)")))
      << low.failure;
  EXPECT_EQ(run(bc, "reuse+prefetch", settings[4]).failure,
            "weight tile of 1048576 bytes exceeds page size 524288: video.ff.up tile 0 "
            "(transformer_blocks.0.ff.net.0.proj.weight rows [0, 1024) cols [0, 512))");
}

TEST(PsiExecResources, TooSmallWorkspaceNamesTheTile) {
  const BlockCase bc("tiny", "ltx25", tiny_shape());
  exec::ArenaSettings a = exec::default_arena(bc.config);
  a.workspace = 16 * 1024;  // a [32, 1024] BF16 hidden tile (32 tokens in one row tile) is 64 KiB
  const exec::BlockRun r = run(bc, "ffn-reuse", a);
  EXPECT_EQ(r.outcome, rt::Outcome::workspace_exhausted);
  EXPECT_EQ(r.plan.outcome, rt::Outcome::workspace_exhausted);
  EXPECT_EQ(r.failure, "workspace exhausted: video.ff.up hidden tile 0 needs 64.0 KiB, 16.0 KiB free of 16 KiB");
}

TEST(PsiExecResources, CountersFollowTheSchedules) {
  for (const char* config : {"tiny", "small"}) {
    const BlockCase bc(config, "ltx25", tiny_72());
    const exec::ArenaSettings a = exec::default_arena(bc.config);
    exec::ExecOptions o;
    o.row_tile = 32;  // three video row tiles, one audio row tile
    const exec::BlockRun base = run(bc, "baseline", a, o), reuse = run(bc, "ffn-reuse", a, o),
                         async = run(bc, "reuse+async-journal", a, o), pre = run(bc, "reuse+prefetch", a, o);
    for (const auto* r : {&base, &reuse, &async, &pre}) ASSERT_EQ(r->outcome, rt::Outcome::complete) << r->failure;
    const rt::Counters &cb = base.report.counters, &cr = reuse.report.counters, &ca = async.report.counters,
                       &cp = pre.report.counters;
    const auto W = rt::CopyKind::weights;
    const auto J = rt::CopyKind::journal;
    const std::vector<StreamFfn> ffn = ffn_streams(bc, std::uint64_t(a.page), o.row_tile);

    // Recompute streams each row tile's up-projection once per down-projection group, reuse
    // once per row tile.
    std::uint64_t extra_up = 0, hidden_bytes = 0, hidden_reloads = 0, hidden_tiles = 0, single_tile_reloads = 0;
    for (const StreamFfn& f : ffn) {
      extra_up += std::uint64_t(f.row_tiles * (f.g.n_out - 1) * f.hidden * f.dim * 2);
      hidden_bytes += std::uint64_t(f.tokens * f.hidden * 2);
      hidden_reloads += std::uint64_t(f.row_tiles * f.g.n_out * f.g.n_hidden);
      hidden_tiles += std::uint64_t(f.row_tiles * f.g.n_hidden);
      if (f.g.n_hidden == 1) single_tile_reloads += std::uint64_t(f.row_tiles * f.g.n_out);
      ASSERT_GT(f.g.n_out, 1) << config;  // otherwise recompute would recompute nothing
    }
    EXPECT_EQ(cr.h2d(W), reuse.plan.weight_bytes) << config;
    EXPECT_EQ(cb.h2d(W), cr.h2d(W) + extra_up) << config;
    EXPECT_LT(cr.weight_tiles, cb.weight_tiles) << config;
    // ... and pays in journal traffic: the hidden tiles go out once and come back per group.
    EXPECT_EQ(cr.journal_commits, cb.journal_commits + hidden_tiles) << config;
    EXPECT_EQ(cr.d2h(J), cb.d2h(J) + hidden_bytes) << config;
    EXPECT_EQ(cr.journal_reloads, cb.journal_reloads + hidden_reloads) << config;
    EXPECT_GT(cr.h2d(J), cb.h2d(J)) << config;
    EXPECT_EQ(cb.journal_kept_resident + cr.journal_kept_resident, 0u) << config;

    // The async journal moves the same state with fewer host blocks: a reload into the region
    // the value was committed from stays resident — at least a single hidden tile across its
    // output groups (tiny: the 1,024-channel video hidden width is one tile).
    EXPECT_GE(ca.journal_kept_resident, single_tile_reloads) << config;
    EXPECT_GT(ca.journal_kept_resident, 0u) << config;
    EXPECT_EQ(ca.journal_reloads + ca.journal_kept_resident, cr.journal_reloads) << config;
    EXPECT_LT(ca.h2d(J), cr.h2d(J)) << config;
    EXPECT_EQ(ca.d2h(J), cr.d2h(J)) << config;
    EXPECT_EQ(ca.journal_commits, cr.journal_commits) << config;
    EXPECT_LT(ca.blocking_syncs, cr.blocking_syncs) << config;
    EXPECT_EQ(ca.h2d(W), cr.h2d(W)) << config;
    EXPECT_GT(ca.resident_bytes_peak, 0u) << config;

    // Prefetch issues every tile's copy while the one before is consumed (on the copy stream);
    // the bytes are the same.
    EXPECT_EQ(async.exec.tiles_copied_ahead, 0u) << config;
    EXPECT_EQ(reuse.exec.tiles_copied_ahead, 0u) << config;
    EXPECT_EQ(pre.exec.tiles_copied_ahead, cp.weight_tiles - 1) << config;
    EXPECT_EQ(cp.h2d(W), ca.h2d(W)) << config;
    EXPECT_EQ(cp.h2d(J), ca.h2d(J)) << config;
    EXPECT_EQ(cp.d2h(J), ca.d2h(J)) << config;
    EXPECT_EQ(cp.journal_kept_resident, ca.journal_kept_resident) << config;
  }
}

TEST(PsiExecResources, ModelInvocationInOneArena) {
  // Both tiny blocks in one executor, the second fed the first's outputs: one device allocation,
  // and each block bitwise equal to the host chain.
  const BlockCase bc("tiny", "ltx25", tiny_72());
  psi::pipeline::CheckpointWeights src(bc.weights);
  const auto& v = model::numerics_variant("modified");
  exec::PsiExecutor ex(bc.config, *bc.weights, v, exec::schedule("reuse+prefetch"), exec::default_arena(bc.config), {});
  model::BlockInputs host_in = bc.inputs, psi_in = bc.inputs;
  for (int b = 0; b < 2; ++b) {
    const model::BlockTaps want = model::block_forward(bc.config, model::load_block_weights(src, bc.config, b), host_in, v);
    const model::BlockTaps got = ex.run_block(b, psi_in);
    expect_bitwise(got, want, "block " + std::to_string(b));
    host_in.video.x = want.video_out;
    host_in.audio.x = want.audio_out;
    psi_in.video.x = got.video_out;
    psi_in.audio.x = got.audio_out;
  }
  const rt::RunReport rep = ex.finish();
  EXPECT_EQ(rep.device_allocations, 1u);
  EXPECT_LE(rep.peak, rep.bound);
  // The first tile of each block is requested by its consumer; every other one was copied ahead.
  EXPECT_EQ(ex.exec_counters().tiles_copied_ahead, rep.counters.weight_tiles - 2);
}

TEST(PsiExecResources, OneExecutorRunsStageOneThenStageTwo) {
  // The tiny trajectory's first block at stage 1 (3 x 4 x 6 = 72 video tokens) and at stage 2
  // (3 x 8 x 12 = 288, four times as many) in one executor and the scaled default arena
  // (5 MiB / 512 KiB pages): the runtime made for the first serves the second.
  const BlockCase bc("tiny", "ltx25", tiny_shape());
  psi::pipeline::CheckpointWeights src(bc.weights);
  const psi::pipeline::TrajectoryCase tc{"first_block", "first_block", 1, 7, 7};
  const auto& v = model::numerics_variant("baseline");
  const model::BlockWeights w = model::load_block_weights(src, bc.config, 0);
  exec::PsiExecutor ex(bc.config, *bc.weights, v, exec::schedule("reuse+prefetch"), exec::default_arena(bc.config), {});
  std::uint64_t declared = 0;
  for (int stage : {1, 2}) {
    model::SynthInitSource model_weights(7);  // the model-level tensors that make the inputs
    const model::BlockInputs in = psi::pipeline::first_block_inputs(bc.config, model_weights, tc, stage);
    ASSERT_EQ(in.video.x.dim(1), stage == 1 ? 72 : 288);
    const model::BlockTaps got = ex.run_block(0, in);
    expect_bitwise(got, model::block_forward(bc.config, w, in, v), "stage " + std::to_string(stage));
    const rt::RunReport rep = ex.report();
    if (stage == 1) declared = rep.live_bytes;
    EXPECT_EQ(rep.live_bytes, declared);
    EXPECT_LE(ex.last_plan().scratch_bytes, declared) << "stage " << stage;
    EXPECT_LE(rep.scratch_high_water, declared) << "stage " << stage;
  }
  const rt::RunReport rep = ex.finish();
  EXPECT_EQ(rep.device_allocations, 1u);
  EXPECT_LE(rep.peak, rep.bound);
}

TEST(PsiExecResources, ExecutorStopsAfterAFailure) {
  const BlockCase big("small", "ltx25", capacity_shape());
  exec::PsiExecutor ex(big.config, *big.weights, model::numerics_variant("baseline"), exec::schedule("baseline"),
                       exec::arena_setting(big.config, 28 * kMiB, 8 * kMiB), {});
  EXPECT_THROW(ex.run_block(0, big.inputs), rt::RunFailure);
  EXPECT_EQ(error_of([&] { ex.run_block(0, big.inputs); }).rfind("PSI executor: the run already failed (scratch exhausted: ", 0), 0u);
  const BlockCase tiny("tiny", "ltx25", tiny_shape());
  exec::PsiExecutor ex2(tiny.config, *tiny.weights, model::numerics_variant("baseline"), exec::schedule("baseline"),
                        exec::default_arena(tiny.config), {});
  EXPECT_EQ(error_of([&] { ex2.runtime(); }), "PSI executor: no block has run yet (the runtime is sized by the first block)");
}

TEST(PsiExecResources, DenseLaterBlockBeyondTheScratchIsScratchExhausted) {
  // MATH attention keeps a block's whole k and v: a later block with more tokens can outgrow
  // the arena the first one fitted, and then fails as the runtime's scratch_exhausted.
  const BlockCase bc("tiny", "ltx25", tiny_shape());
  const BlockCase larger("tiny", "ltx25", {.frames = 2, .height = 12, .width = 12, .audio_tokens = 12, .context_rows = 9});
  const auto& v = model::numerics_variant("dense");
  const exec::ArenaSettings a = exec::arena_setting(bc.config, 26 * kMiB, 8 * kMiB);
  exec::PsiExecutor ex(bc.config, *bc.weights, v, exec::schedule("baseline"), a, {});
  expect_bitwise(ex.run_block(0, bc.inputs), bc.reference(v), "first block");
  EXPECT_EQ(ex.report().live_bytes, ex.report().layout.scratch);  // MATH: the whole scratch is declared
  try {
    ex.run_block(0, larger.inputs);
    ADD_FAILURE() << "the larger dense block ran";
  } catch (const rt::RunFailure& f) {
    EXPECT_EQ(f.outcome(), rt::Outcome::scratch_exhausted);
    EXPECT_TRUE(std::regex_match(std::string(f.what()), std::regex(R"(scratch exhausted: video\.attn1 [a-z ]+ tile 0 needs .*)")))
        << f.what();
  }
}

// The largest row tile that fits: every schedule's declared live set within the scratch and its
// plan complete; one key tile more does not fit; the block at that row tile keeps the host bits.
TEST(PsiExecSettings, FittingRowTileIsTheLargestThatFitsAndKeepsTheBits) {
  const BlockCase bc("small", "ltx25", capacity_shape());
  const auto& v = model::numerics_variant("baseline");
  const exec::ArenaSettings a = exec::default_arena(bc.config);
  const exec::BlockShapes shapes = exec::block_shapes(bc.config, bc.inputs);
  const std::int64_t r = exec::fitting_row_tile(bc.config, v, exec::schedules(), a, shapes);
  EXPECT_EQ(r % v.key_tile, 0);
  EXPECT_GT(r, exec::default_row_tile(bc.config));
  const std::uint64_t scratch = std::uint64_t(a.arena - 2 * a.page - a.workspace);
  bool next_fits = true;
  for (const auto& s : exec::schedules()) {
    EXPECT_LE(exec::declared_live(bc.config, v, s, a, shapes, r), scratch) << s.name;
    EXPECT_EQ(exec::plan_block(bc.config, v, s, a, shapes, r).outcome, rt::Outcome::complete) << s.name;
    next_fits = next_fits && exec::declared_live(bc.config, v, s, a, shapes, r + v.key_tile) <= scratch &&
                exec::plan_block(bc.config, v, s, a, shapes, r + v.key_tile).outcome == rt::Outcome::complete;
  }
  EXPECT_TRUE(!next_fits || r + v.key_tile > shapes.video.tokens) << "row tile " << r + v.key_tile << " fits too";
  const exec::BlockRun run = exec::run_block(bc.config, *bc.weights, 0, bc.inputs, v, exec::schedule("reuse+prefetch"),
                                             a, {.row_tile = r});
  ASSERT_EQ(run.outcome, rt::Outcome::complete) << run.failure;
  expect_bitwise(run.probes, bc.reference(v), "row tile " + std::to_string(r));
  EXPECT_EQ(exec::fitting_row_tile(bc.config, model::numerics_variant("dense"), exec::schedules(), a, shapes),
            exec::default_row_tile(bc.config));
}

// At full size (planning only) the first stage-2 block fits 1,664-row tiles in 80 MiB / 8 MiB:
// 2.39x the block's weights streamed instead of 3.78x at the default 1,024.
TEST(PsiExecSettings, FullSizeFittingRowTileStreamsFewerWeights) {
  const model::ModelConfig c = model::model_config("ltx2-22b");
  const auto& v = model::numerics_variant("baseline");
  const exec::ArenaSettings a = exec::default_arena(c);
  const exec::BlockShapes shapes = exec::block_shapes(c, exec::TokenCounts{.video = 4928, .audio = 126, .context = 1});
  const exec::Schedule& s = exec::schedule("reuse+prefetch");
  const std::int64_t r = exec::fitting_row_tile(c, v, {s}, a, shapes);
  EXPECT_EQ(r, 1664);
  const exec::BlockPlan fit = exec::plan_block(c, v, s, a, shapes, r), def = exec::plan_block(c, v, s, a, shapes);
  EXPECT_LT(fit.weight_bytes, def.weight_bytes);
  EXPECT_LE(fit.scratch_bytes, std::uint64_t(a.arena - 2 * a.page - a.workspace));
}
