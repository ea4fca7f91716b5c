// PSI executor resources: schedules and arena settings, the declared bound against the
// measured peak (S_live from the plan, exactly the run's scratch high water), one device
// allocation, the capacity sweep's outcomes on `small`, the counters' directions between
// schedules (with the exact amounts the plan implies), and a multi-block run in one arena.
#include <gtest/gtest.h>

#include <regex>

#include "engine/psi/tiling.h"
#include "tests/test_psi_exec_support.h"

using namespace psi_exec_test;

namespace {

constexpr std::int64_t kMiB = 1 << 20;

exec::SyntheticShape tiny_shape() { return {.frames = 2, .height = 4, .width = 4, .audio_tokens = 12, .context_rows = 9}; }
// Large enough that the 48 MiB (scaled) arena cannot hold the video attention's live set.
exec::SyntheticShape capacity_shape() {
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

std::uint64_t block_bytes(const model::ModelConfig& c, int index) {
  std::uint64_t n = 0;
  for (const model::WeightSpec& w : model::block_weight_specs(c, index)) n += std::uint64_t(psi::numel(w.shape)) * 2;
  return n;
}

struct StreamFfn {
  std::int64_t tokens, dim, hidden;
  exec::FfnGeometry g;
};

std::vector<StreamFfn> ffn_streams(const BlockCase& bc, std::uint64_t page) {
  const model::ModelConfig& c = bc.config;
  const auto& v = model::numerics_variant("baseline");
  return {{bc.inputs.video.x.dim(1), c.video_dim(), c.video_hidden(),
           exec::ffn_geometry(c, v, c.video_hidden(), c.video_dim(), page)},
          {bc.inputs.audio.x.dim(1), c.audio_dim(), c.audio_hidden(),
           exec::ffn_geometry(c, v, c.audio_hidden(), c.audio_dim(), page)}};
}

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

TEST(PsiExecSettings, BackendCudaIsRefusedAutoIsCpu) {
  const BlockCase bc("tiny", "ltx25", tiny_shape());
  const auto& v = model::numerics_variant("baseline");
  const auto make = [&](const std::string& backend) {
    exec::PsiExecutor ex(bc.config, *bc.weights, v, exec::schedule("baseline"), exec::default_arena(bc.config),
                         {.backend = backend});
  };
  EXPECT_EQ(error_of([&] { make("cuda"); }),
            "the PSI executor's CUDA kernels are not implemented yet (backend cuda requested; use cpu or auto)");
  EXPECT_EQ(error_of([&] { make("gpu"); }), "unknown backend 'gpu' for the PSI executor (known: cpu, auto; cuda has no kernels yet)");
  const exec::BlockRun r = run(bc, "baseline", exec::default_arena(bc.config), {.backend = "auto"});
  ASSERT_EQ(r.outcome, rt::Outcome::complete) << r.failure;
  EXPECT_EQ(r.report.backend, "cpu");
}

TEST(PsiExecResources, PlannedLiveSetIsTheMeasuredOneAndBoundsThePeak) {
  const BlockCase bc("tiny", "ltx25", tiny_shape());
  const exec::ArenaSettings a = exec::default_arena(bc.config);
  for (const exec::Schedule& s : exec::schedules()) {
    const exec::BlockRun r = run(bc, s.name, a);
    ASSERT_EQ(r.outcome, rt::Outcome::complete) << s.name << ": " << r.failure;
    const rt::RunReport& rep = r.report;
    EXPECT_EQ(rep.device_allocations, 1u) << s.name;
    EXPECT_EQ(rep.live_bytes, r.plan.scratch_bytes) << s.name;
    EXPECT_EQ(rep.eps_bytes, 0u) << s.name;
    EXPECT_EQ(rep.scratch_high_water, r.plan.scratch_bytes) << s.name;  // the plan is the run's allocation sequence
    EXPECT_EQ(rep.workspace_high_water, r.plan.workspace_bytes) << s.name;
    EXPECT_EQ(rep.bound, r.plan.scratch_bytes + std::uint64_t(a.workspace + 2 * a.page)) << s.name;
    EXPECT_LE(rep.peak, rep.bound) << s.name;
    // Nothing is left out of the peak: pages, and at some point live state plus workspace.
    EXPECT_GT(rep.peak, std::uint64_t(2 * a.page) + r.plan.scratch_bytes / 2) << s.name;
    // The largest live set is the video self-attention's: x, out, h, the sdpa output, q, k and v
    // (seven [N, D] tensors) and the one-row gate_msa, reached when v is allocated.
    const std::uint64_t nd = std::uint64_t(bc.inputs.video.x.numel()) * 2, gate = std::uint64_t(bc.config.video_dim()) * 2;
    EXPECT_EQ(r.plan.scratch_bytes, 7 * nd + gate) << s.name;
    EXPECT_EQ(r.plan.scratch_peak_at, "video.attn1 v") << s.name;
    EXPECT_EQ(rep.counters.weight_tiles, r.plan.tiles.size()) << s.name;
    EXPECT_EQ(rep.counters.h2d(rt::CopyKind::weights), r.plan.weight_bytes) << s.name;
  }
}

TEST(PsiExecResources, CapacitySweepOnSmall) {
  const BlockCase bc("small", "ltx25", capacity_shape());
  const auto settings = exec::capacity_settings(bc.config);
  const rt::Outcome want[] = {rt::Outcome::scratch_exhausted, rt::Outcome::complete, rt::Outcome::complete,
                              rt::Outcome::complete, rt::Outcome::tile_exceeds_page, rt::Outcome::complete};
  const model::BlockProbes ref = bc.reference(model::numerics_variant("baseline"));
  ASSERT_EQ(settings.size(), 6u);
  for (std::size_t i = 0; i < settings.size(); ++i) {
    const exec::BlockRun r = run(bc, "reuse+prefetch", settings[i]);
    EXPECT_EQ(r.outcome, want[i]) << settings[i].label << ": " << r.failure;
    EXPECT_EQ(r.report.outcome, r.outcome) << settings[i].label;
    if (r.outcome == rt::Outcome::complete) {
      expect_bitwise(r.probes, ref, settings[i].label);
      EXPECT_LE(r.report.peak, r.report.bound) << settings[i].label;
      EXPECT_EQ(r.report.device_allocations, 1u) << settings[i].label;
    }
  }
  const exec::BlockRun low = run(bc, "reuse+prefetch", settings[0]);
  EXPECT_GT(low.plan.scratch_bytes, low.report.layout.scratch);  // the plan says so before running
  EXPECT_EQ(low.report.live_bytes, low.report.layout.scratch);
  EXPECT_TRUE(std::regex_match(low.failure, std::regex(R"(scratch exhausted: video\.attn1 \w+ needs 448\.0 KiB, [0-9.]+ KiB free of 3 MiB)")))
      << low.failure;
  EXPECT_EQ(run(bc, "reuse+prefetch", settings[4]).failure,
            "weight tile of 1048576 bytes exceeds page size 524288: video.ff.up tile 0 "
            "(transformer_blocks.0.ff.net.0.proj.weight rows [0, 1024) cols [0, 512))");
}

TEST(PsiExecResources, TooSmallWorkspaceNamesTheTile) {
  const BlockCase bc("tiny", "ltx25", tiny_shape());
  exec::ArenaSettings a = exec::default_arena(bc.config);
  a.workspace = 16 * 1024;  // a [32, 1024] BF16 hidden tile is 64 KiB
  const exec::BlockRun r = run(bc, "ffn-reuse", a);
  EXPECT_EQ(r.outcome, rt::Outcome::workspace_exhausted);
  EXPECT_EQ(r.failure, "workspace exhausted: video.ff.up hidden tile 0 needs 64.0 KiB, 16.0 KiB free of 16 KiB");
}

TEST(PsiExecResources, CountersFollowTheSchedules) {
  for (const char* config : {"tiny", "small"}) {
    const BlockCase bc(config, "ltx25", tiny_shape());
    const exec::ArenaSettings a = exec::default_arena(bc.config);
    const exec::BlockRun base = run(bc, "baseline", a), reuse = run(bc, "ffn-reuse", a),
                         async = run(bc, "reuse+async-journal", a), pre = run(bc, "reuse+prefetch", a);
    for (const auto* r : {&base, &reuse, &async, &pre}) ASSERT_EQ(r->outcome, rt::Outcome::complete) << r->failure;
    const rt::Counters &cb = base.report.counters, &cr = reuse.report.counters, &ca = async.report.counters,
                       &cp = pre.report.counters;
    const auto W = rt::CopyKind::weights;
    const auto J = rt::CopyKind::journal;
    const std::vector<StreamFfn> ffn = ffn_streams(bc, std::uint64_t(a.page));

    // Reuse streams every weight of the block exactly once; recompute streams each stream's
    // up-projection once per down-projection group.
    std::uint64_t extra_up = 0, hidden_bytes = 0, hidden_reloads = 0, hidden_tiles = 0;
    for (const StreamFfn& f : ffn) {
      extra_up += std::uint64_t((f.g.n_out - 1) * f.hidden * f.dim * 2);
      hidden_bytes += std::uint64_t(f.tokens * f.hidden * 2);
      hidden_reloads += std::uint64_t(f.g.n_out * f.g.n_hidden);
      hidden_tiles += std::uint64_t(f.g.n_hidden);
      ASSERT_GT(f.g.n_out, 1) << config;  // otherwise recompute would recompute nothing
    }
    EXPECT_EQ(cr.h2d(W), block_bytes(bc.config, 0)) << config;
    EXPECT_EQ(cb.h2d(W), block_bytes(bc.config, 0) + extra_up) << config;
    EXPECT_LT(cr.weight_tiles, cb.weight_tiles) << config;
    // ... and pays in journal traffic: the hidden tiles go out once and come back per group.
    EXPECT_EQ(cr.journal_commits, cb.journal_commits + hidden_tiles) << config;
    EXPECT_EQ(cr.d2h(J), cb.d2h(J) + hidden_bytes) << config;
    EXPECT_EQ(cr.journal_reloads, cb.journal_reloads + hidden_reloads) << config;
    EXPECT_GT(cr.h2d(J), cb.h2d(J)) << config;
    EXPECT_EQ(cb.journal_kept_resident + cr.journal_kept_resident, 0u) << config;

    // The async journal moves the same state with fewer host blocks: values reloaded where they
    // were committed stay resident (x1/n1 of both streams, video x2 and x3, the self-attention
    // RoPE tables reloaded for k where q had them, and a single hidden tile across groups).
    std::uint64_t resident = 6 + 4;
    for (const StreamFfn& f : ffn)
      if (f.g.n_hidden == 1) resident += std::uint64_t(f.g.n_out);
    EXPECT_EQ(ca.journal_kept_resident, resident) << config;
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
  const BlockCase bc("tiny", "ltx25", tiny_shape());
  psi::pipeline::CheckpointWeights src(bc.weights);
  const auto& v = model::numerics_variant("modified");
  exec::PsiExecutor ex(bc.config, *bc.weights, v, exec::schedule("reuse+prefetch"), exec::default_arena(bc.config), {});
  model::BlockInputs host_in = bc.inputs, psi_in = bc.inputs;
  for (int b = 0; b < 2; ++b) {
    const model::BlockProbes want = model::block_forward(bc.config, model::load_block_weights(src, bc.config, b), host_in, v);
    const model::BlockProbes got = ex.run_block(b, psi_in);
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

TEST(PsiExecResources, ExecutorStopsAfterAFailureAndKeepsItsSize) {
  const BlockCase big("small", "ltx25", capacity_shape());
  exec::PsiExecutor ex(big.config, *big.weights, model::numerics_variant("baseline"), exec::schedule("baseline"),
                       exec::capacity_settings(big.config)[0], {});
  EXPECT_THROW(ex.run_block(0, big.inputs), rt::RunFailure);
  EXPECT_EQ(error_of([&] { ex.run_block(0, big.inputs); }).rfind("PSI executor: the run already failed (scratch exhausted: ", 0), 0u);

  const BlockCase tiny("tiny", "ltx25", tiny_shape());
  const BlockCase larger("tiny", "ltx25", {.frames = 3, .height = 4, .width = 4, .audio_tokens = 12, .context_rows = 9});
  exec::PsiExecutor ex2(tiny.config, *tiny.weights, model::numerics_variant("baseline"), exec::schedule("baseline"),
                        exec::default_arena(tiny.config), {});
  EXPECT_EQ(error_of([&] { ex2.runtime(); }), "PSI executor: no block has run yet (the runtime is sized by the first block)");
  ex2.run_block(0, tiny.inputs);
  EXPECT_NE(error_of([&] { ex2.run_block(1, larger.inputs); }).find("needs S_live"), std::string::npos);
}
