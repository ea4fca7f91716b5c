// The arena contract: settings checks, scratch/workspace exhaustion and page overflow as typed
// run failures with exact messages, one device allocation per run, and the peak-vs-bound check.
#include <gtest/gtest.h>

#include <functional>
#include <map>

#include "engine/checkpoint/synth_source.h"
#include "engine/runtime/pages.h"
#include "engine/runtime/run_report.h"
#include "engine/runtime/runtime.h"
#include "engine/measure/sizes.h"

namespace rt = psi::rt;

namespace {

constexpr std::int64_t KiB = 1024, MiB = 1024 * 1024;

rt::RuntimeConfig small_config() {
  rt::RuntimeConfig c;
  c.arena_bytes = 64 * KiB;
  c.page_bytes = 8 * KiB;
  c.workspace_bytes = 4 * KiB;
  c.live_bytes = 16 * KiB;
  return c;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const psi::Error& e) {
    return e.what();
  }
  return "no error";
}

template <class E>
E caught(const std::function<void()>& f) {
  try {
    f();
  } catch (const E& e) {
    return e;
  }
  throw std::runtime_error("expected exception not thrown");
}

}  // namespace

TEST(ArenaSettings, BadSizesNameTheSetting) {
  auto with = [](auto edit) {
    return error_of([&] {
      rt::RuntimeConfig c = small_config();
      edit(c);
      rt::Runtime r(c);
    });
  };
  EXPECT_EQ(with([](auto& c) { c.arena_bytes = 0; }), "arena_bytes must be positive (got 0)");
  EXPECT_EQ(with([](auto& c) { c.page_bytes = -256; }), "page_bytes must be positive (got -256)");
  EXPECT_EQ(with([](auto& c) { c.workspace_bytes = 0; }), "workspace_bytes must be positive (got 0)");
  EXPECT_EQ(with([](auto& c) { c.page_bytes = 1000; }), "page_bytes 1000 is not a multiple of the 256-byte alignment");
  EXPECT_EQ(with([](auto& c) { c.arena_bytes = 65537; }), "arena_bytes 65537 is not a multiple of the 256-byte alignment");
  EXPECT_EQ(with([](auto& c) { c.workspace_bytes = 48 * KiB; }),
            "page_bytes 8192 x 2 + workspace_bytes 49152 leave no scratch in arena_bytes 65536");
  EXPECT_EQ(with([](auto& c) { c.page_bytes = 40 * KiB; }),
            "page_bytes 40960 x 2 + workspace_bytes 4096 leave no scratch in arena_bytes 65536");
  EXPECT_EQ(with([](auto& c) { c.live_bytes = 0; }), "live_bytes (S_live) must be declared and positive (got 0)");
  EXPECT_EQ(with([](auto& c) { c.live_bytes = 45 * KiB; }),
            "live_bytes 46080 exceeds the scratch capacity 45056 left by arena_bytes 65536");
  EXPECT_EQ(with([](auto& c) { c.eps_bytes = -1; }), "eps_bytes must not be negative (got -1)");
}

TEST(ArenaSettings, BadSizesAreBadInput) {
  rt::RuntimeConfig c = small_config();
  c.page_bytes = 1000;
  EXPECT_EQ(caught<psi::Error>([&] { rt::Runtime r(c); }).code(), psi::Exit::bad_input);
}

TEST(ArenaLayout, RegionsTileTheArena) {
  const auto l = rt::ArenaLayout::make(64 * KiB, 8 * KiB, 4 * KiB);
  EXPECT_EQ(l.page_region(0).offset, 0u);
  EXPECT_EQ(l.page_region(1).offset, std::uint64_t(8 * KiB));
  EXPECT_EQ(l.workspace_region().offset, std::uint64_t(16 * KiB));
  EXPECT_EQ(l.scratch_region().offset, std::uint64_t(20 * KiB));
  EXPECT_EQ(l.scratch_region().end(), std::uint64_t(64 * KiB));
}

TEST(ArenaSizes, Formatting) {
  EXPECT_EQ(rt::format_amount(12 * MiB), "12.0 MiB");
  EXPECT_EQ(rt::format_amount(8 * MiB + MiB / 2), "8.5 MiB");
  EXPECT_EQ(rt::format_amount(1536), "1.5 KiB");
  EXPECT_EQ(rt::format_amount(100), "100 bytes");
  EXPECT_EQ(rt::format_capacity(56 * MiB), "56 MiB");
  EXPECT_EQ(rt::format_capacity(64 * KiB), "64 KiB");
  EXPECT_EQ(rt::format_capacity(1280), "1280 bytes");
}

TEST(Scratch, ExhaustionIsATypedRunFailureWithTheExactMessage) {
  rt::RuntimeConfig c;
  c.arena_bytes = 64 * MiB;
  c.page_bytes = 2 * MiB;
  c.workspace_bytes = 4 * MiB;
  c.live_bytes = 56 * MiB;
  rt::Runtime r(c);
  r.scratch_alloc(47 * MiB + MiB / 2, "attn1", -1, "hidden");
  const auto f = caught<rt::RunFailure>([&] { r.scratch_alloc(12 * MiB, "ffn.down", 3, "h"); });
  EXPECT_STREQ(f.what(), "scratch exhausted: ffn.down tile 3 needs 12.0 MiB, 8.5 MiB free of 56 MiB");
  EXPECT_EQ(f.outcome(), rt::Outcome::scratch_exhausted);
  EXPECT_EQ(f.code(), psi::Exit::run_failed);
}

TEST(Scratch, WorkspaceExhaustion) {
  rt::Runtime r(small_config());
  r.workspace_alloc(3 * KiB, "gemm", 0, "acc");
  const auto f = caught<rt::RunFailure>([&] { r.workspace_alloc(2 * KiB, "gemm", 1, "acc"); });
  EXPECT_STREQ(f.what(), "workspace exhausted: gemm tile 1 needs 2.0 KiB, 1.0 KiB free of 4 KiB");
  EXPECT_EQ(f.outcome(), rt::Outcome::workspace_exhausted);
}

TEST(Scratch, LifoFreesMarksAndHighWater) {
  rt::Runtime r(small_config());
  const auto m = r.scratch_mark();
  auto a = r.scratch_alloc(100, "op", 0, "a");  // rounded up to the alignment
  auto b = r.scratch_alloc(256, "op", 0, "b");
  EXPECT_EQ(a.bytes, 256u);
  EXPECT_EQ(b.offset, a.offset + 256);
  EXPECT_THROW(r.scratch_free(a), rt::ScheduleViolation);
  r.scratch_free(b);
  r.scratch_free(a);
  r.scratch_alloc(1024, "op", 1, "c");
  r.scratch_reset(m);
  const rt::RunReport rep = r.finish();
  EXPECT_EQ(rep.scratch_high_water, 1024u);
  EXPECT_EQ(rep.peak, std::uint64_t(2 * 8 * KiB + 1024));
}

TEST(Pages, TileLargerThanThePageFailsTheRun) {
  rt::Runtime r(small_config());
  psi::ckpt::SynthSource src(0, {{"transformer_blocks.0.ff.net.0.proj.weight", {128, 64}}});
  rt::WeightSlice w{"transformer_blocks.0.ff.net.0.proj.weight", {0, 128, 0, 64}, "ffn.up", 0};
  const int p = r.pages().acquire("ffn.up");
  const auto f = caught<rt::RunFailure>([&] { r.pages().fill(p, r.compute(), src, w); });
  EXPECT_STREQ(f.what(),
               "weight tile of 16384 bytes exceeds page size 8192: ffn.up tile 0 "
               "(transformer_blocks.0.ff.net.0.proj.weight rows [0, 128) cols [0, 64))");
  EXPECT_EQ(f.outcome(), rt::Outcome::tile_exceeds_page);
  EXPECT_EQ(r.pages().state(p), rt::PageState::free);
}

TEST(RunReport, ExactlyOneDeviceAllocationAndTheBound) {
  rt::RuntimeConfig c = small_config();
  c.eps_bytes = 512;
  rt::Runtime r(c);
  r.scratch_alloc(10 * KiB, "a", -1, "x");
  r.workspace_alloc(2 * KiB, "a", -1, "w");
  const rt::RunReport rep = r.finish();
  EXPECT_EQ(rep.outcome, rt::Outcome::complete);
  EXPECT_EQ(rep.device_allocations, 1u);
  EXPECT_EQ(rep.pinned_allocations, 2u);  // the two pages' staging buffers (host memory)
  EXPECT_EQ(rep.pinned_bytes, std::uint64_t(2 * 8 * KiB));
  EXPECT_EQ(rep.bound, std::uint64_t(16 * KiB + 4 * KiB + 16 * KiB + 512));
  EXPECT_EQ(rep.peak, std::uint64_t(16 * KiB + 10 * KiB + 2 * KiB));
  EXPECT_LE(rep.peak, rep.bound);
  const auto j = rt::to_json(rep);
  EXPECT_EQ(j["outcome"], "complete");
  EXPECT_EQ(j["managed_peak_bytes"], rep.peak);
  EXPECT_EQ(j["bound_bytes"], rep.bound);
  EXPECT_EQ(j["device_allocations"], 1);
  EXPECT_EQ(rt::summary(rep),
            "run complete on cpu: managed peak 28.0 KiB of bound 36.5 KiB (S_live + W + 2P + eps), 1 device "
            "allocation(s); H2D weights 0 bytes, journal 0 bytes; D2H journal 0 bytes; 0 commits, 0 reloads (0 kept "
            "resident); 1 blocking syncs");
}

TEST(RunReport, PeakAboveTheDeclaredBoundFailsLoudly) {
  rt::RuntimeConfig c = small_config();
  c.live_bytes = 4 * KiB;
  rt::Runtime r(c);
  // Fits the scratch, but exceeds S_live by more than the unused workspace W.
  r.scratch_alloc(9 * KiB, "ffn.up", 0, "h");
  const auto f = caught<rt::RunFailure>([&] { r.finish(); });
  EXPECT_STREQ(f.what(),
               "managed peak 25600 bytes (25.0 KiB) exceeds the declared bound 24576 bytes = S_live 4096 + W 4096 "
               "+ 2P 16384 + eps 0");
  EXPECT_EQ(f.outcome(), rt::Outcome::bound_exceeded);
}

// A fixed budget on the CPU backend (RuntimeConfig::memory_cap) holds the arena and every pinned
// host buffer under the cap: the runtime of small_config() holds its arena and one staging
// buffer per page, and one byte less than that is a cap_exceeded failure naming the buffer that
// would pass it, made before it is allocated.
TEST(MemoryCap, HoldsTheArenaAndThePinnedBuffers) {
  rt::RuntimeConfig c = small_config();
  const std::uint64_t needed = 64 * KiB + 2 * 8 * KiB;
  c.memory_cap = needed;
  {
    rt::Runtime r(c);
    EXPECT_EQ(r.report().pinned_bytes, 2 * 8 * KiB);
    const auto f = caught<rt::RunFailure>([&] { r.allocate_pinned(1, "one more byte"); });
    EXPECT_EQ(f.outcome(), rt::Outcome::cap_exceeded);
    EXPECT_EQ(std::string(f.what()), "one more byte (1 bytes) would take the run's memory to " +
                                         std::to_string(needed + 1) + " bytes, over the fixed budget's cap of " +
                                         std::to_string(needed) + " bytes");
    EXPECT_EQ(r.report().pinned_bytes, 2 * 8 * KiB);
  }
  c.memory_cap = needed - 1;
  const auto page = caught<rt::RunFailure>([&] { rt::Runtime r(c); });
  EXPECT_EQ(page.outcome(), rt::Outcome::cap_exceeded);
  EXPECT_NE(std::string(page.what()).find("staging of page 1"), std::string::npos) << page.what();
  c.memory_cap = 64 * KiB - 1;
  EXPECT_NE(error_of([&] { rt::Runtime r(c); }).find("the arena (65536 bytes)"), std::string::npos);
}
