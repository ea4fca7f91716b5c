// The weight-page lifecycle (free -> filling -> ready -> consuming -> free), each violation,
// the two copy schedules, and validate mode catching omitted event waits.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>

#include "engine/checkpoint/synth_source.h"
#include "engine/runtime/pages.h"
#include "engine/runtime/runtime.h"
#include "engine/runtime/validator.h"
#include "engine/synthinit.h"

namespace rt = psi::rt;
using psi::Bf16;

namespace {

const std::string kW = "transformer_blocks.0.ff.net.0.proj.weight";
const psi::Shape kShape{64, 64};

rt::RuntimeConfig config(bool validate = false, rt::Fault fault = rt::Fault::none) {
  rt::RuntimeConfig c;
  c.arena_bytes = 64 * 1024;
  c.page_bytes = 8 * 1024;
  c.workspace_bytes = 4 * 1024;
  c.live_bytes = 16 * 1024;
  c.validate = validate;
  c.fault = fault;
  return c;
}

psi::ckpt::SynthSource source() { return psi::ckpt::SynthSource(7, {{kW, kShape}}); }

rt::WeightSlice tile(int t) { return rt::WeightSlice{kW, {16 * t, 16 * t + 16, 0, 64}, "ffn.up", t}; }

std::string violation_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const rt::ScheduleViolation& e) {
    return e.what();
  }
  return "no violation";
}

// A kernel that only reads the page.
void consume(rt::Runtime& r, rt::Stream s, int page, const std::string& op) {
  r.launch(s, op, {rt::reads(r.pages().region(page))}, [](const rt::KernelContext&) {});
}

const std::string kTile0 = "ffn.up tile 0 (" + kW + " rows [0, 16) cols [0, 64))";
const std::string kTile1 = "ffn.up tile 1 (" + kW + " rows [16, 32) cols [0, 64))";

}  // namespace

TEST(Pages, LifecycleAndContents) {
  rt::Runtime r(config(true));
  auto src = source();
  rt::WeightPages& pages = r.pages();
  const int p = pages.acquire("ffn.up");
  EXPECT_EQ(pages.state(p), rt::PageState::free);
  pages.fill(p, r.copy(), src, tile(1));
  EXPECT_EQ(pages.state(p), rt::PageState::filling);
  pages.ready(p, r.compute());
  EXPECT_EQ(pages.state(p), rt::PageState::ready);
  const rt::DeviceRegion out = r.scratch_alloc(tile(1).bytes(), "ffn.up", 1, "copy of tile");
  const rt::DeviceRegion page = pages.region(p);
  r.launch(r.compute(), "ffn.up tile 1", {rt::reads(page), rt::writes(out)}, [page, out](const rt::KernelContext& k) {
    std::memcpy(k.arena_base + out.offset, k.arena_base + page.offset, page.bytes);
  });
  EXPECT_EQ(pages.state(p), rt::PageState::consuming);
  pages.release(p, r.compute());
  EXPECT_EQ(pages.state(p), rt::PageState::free);

  std::vector<Bf16> host(16 * 64);
  r.copy_d2h(r.compute(), reinterpret_cast<std::byte*>(host.data()), out, rt::CopyKind::other, "read back");
  r.host_wait(r.compute());
  const auto whole = psi::synthinit::make(kW, kShape, 7);
  for (std::size_t i = 0; i < host.size(); ++i) ASSERT_EQ(host[i], whole.data[16 * 64 + i]) << i;
  const rt::RunReport rep = r.finish();
  EXPECT_EQ(rep.counters.weight_tiles, 1u);
  EXPECT_EQ(rep.counters.h2d(rt::CopyKind::weights), 16u * 64 * 2);
}

TEST(Pages, OneOutstandingRequestPerPage) {
  rt::Runtime r(config());
  auto src = source();
  r.pages().fill(0, r.copy(), src, tile(0));
  EXPECT_EQ(violation_of([&] { r.pages().fill(0, r.copy(), src, tile(1)); }),
            "page 0: slice request for " + kTile1 + " while filling with " + kTile0 + " (one outstanding request per page)");
}

TEST(Pages, AcquireNeedsAFreePage) {
  rt::Runtime r(config());
  auto src = source();
  r.pages().fill(r.pages().acquire("ffn.up"), r.copy(), src, tile(0));
  r.pages().fill(r.pages().acquire("ffn.up"), r.copy(), src, tile(1));
  EXPECT_EQ(violation_of([&] { r.pages().acquire("ffn.down"); }),
            "page 0: acquired by ffn.down while filling with " + kTile0 + " (release it first)");
}

TEST(Pages, ReadingBeforeWaitingOnTheCopyIsCaught) {
  rt::Runtime r(config());
  auto src = source();
  r.pages().fill(0, r.copy(), src, tile(0));
  EXPECT_EQ(violation_of([&] { consume(r, r.compute(), 0, "consume"); }),
            "page 0: read by consume on stream compute while filling: that stream did not wait on its copy event");
}

TEST(Pages, ReadingOnAStreamThatDidNotWaitIsCaught) {
  rt::Runtime r(config());
  auto src = source();
  const rt::Stream side = r.create_stream("side");
  r.pages().fill(0, r.copy(), src, tile(0));
  r.pages().ready(0, r.compute());
  EXPECT_EQ(violation_of([&] { consume(r, side, 0, "consume"); }),
            "page 0: read by consume on stream side while ready: that stream did not wait on its copy event");
}

TEST(Pages, OnlyAFillMayWriteAPage) {
  rt::Runtime r(config());
  EXPECT_EQ(violation_of([&] {
              r.launch(r.compute(), "scribble", {rt::writes(r.layout().page_region(1))}, [](const rt::KernelContext&) {});
            }),
            "page 1: written by scribble; only a slice request may write a page");
}

TEST(Pages, ReleaseRules) {
  rt::Runtime r(config());
  auto src = source();
  EXPECT_EQ(violation_of([&] { r.pages().release(0, r.compute()); }), "page 0: released while free");
  r.pages().fill(0, r.copy(), src, tile(0));
  EXPECT_EQ(violation_of([&] { r.pages().release(0, r.compute()); }),
            "page 0: released while filling with " + kTile0 + " (its copy event was never waited on)");
  const rt::Stream side = r.create_stream("side");
  r.pages().ready(0, r.compute());
  r.pages().ready(0, side);
  consume(r, side, 0, "consume");
  EXPECT_EQ(violation_of([&] { r.pages().release(0, r.compute()); }),
            "page 0: released on stream compute but also read on stream side");
}

TEST(Pages, ValidateCatchesAConsumerThatSkipsTheCopyWait) {
  auto src = source();
  {
    // Without validate mode the omitted wait goes unnoticed by the page bookkeeping...
    rt::Runtime r(config(false, rt::Fault::consume_skips_copy_wait));
    r.pages().fill(0, r.copy(), src, tile(0));
    r.pages().ready(0, r.compute());
    EXPECT_EQ(violation_of([&] { consume(r, r.compute(), 0, "consume"); }), "no violation");
  }
  // ...validate mode reports it, naming the operator, the page and the copy.
  rt::Runtime r(config(true, rt::Fault::consume_skips_copy_wait));
  r.pages().fill(0, r.copy(), src, tile(0));
  r.pages().ready(0, r.compute());
  EXPECT_EQ(violation_of([&] { consume(r, r.compute(), 0, "consume"); }),
            "validate: consume on stream compute reads page 0 while its write by fill page 0 with " + kTile0 +
                " on stream copy is not ordered before it (missing event wait)");
}

TEST(Pages, ValidateCatchesAFillThatSkipsTheConsumerWait) {
  auto src = source();
  rt::Runtime r(config(true, rt::Fault::fill_skips_consumer_wait));
  rt::WeightPager pager(r, src, rt::CopySchedule::prefetch);
  for (int t = 0; t < 3; ++t) pager.push(tile(t));
  const int p0 = pager.next(r.compute());  // tile 0 in page 0, tile 1 prefetched into page 1
  consume(r, r.compute(), p0, "consume tile 0");
  pager.done(p0, r.compute());
  // next() prefetches tile 2 into page 0 on the copy stream without waiting for "consume tile 0".
  EXPECT_EQ(violation_of([&] { pager.next(r.compute()); }),
            "validate: fill page 0 with ffn.up tile 2 (" + kW +
                " rows [32, 48) cols [0, 64)) on stream copy writes page 0 while its read by consume tile 0 on stream "
                "compute is not ordered before it (missing event wait)");
}

TEST(Pages, BothSchedulesDeliverTheSameTiles) {
  auto src = source();
  std::vector<std::vector<Bf16>> seen[2];
  std::uint64_t syncs[2];
  for (int sched = 0; sched < 2; ++sched) {
    rt::Runtime r(config(true));
    rt::WeightPager pager(r, src, sched ? rt::CopySchedule::prefetch : rt::CopySchedule::on_compute);
    for (int t = 0; t < 4; ++t) pager.push(tile(t));
    const rt::DeviceRegion out = r.scratch_alloc(4 * tile(0).bytes(), "ffn.up", -1, "tiles");
    for (int t = 0; t < 4; ++t) {
      const int p = pager.next(r.compute());
      const rt::DeviceRegion page = r.pages().region(p);
      const rt::DeviceRegion dst = out.sub(std::uint64_t(t) * page.bytes, page.bytes, "tile");
      r.launch(r.compute(), "ffn.up tile " + std::to_string(t), {rt::reads(page), rt::writes(dst)},
               [page, dst](const rt::KernelContext& k) {
                 std::memcpy(k.arena_base + dst.offset, k.arena_base + page.offset, page.bytes);
               });
      pager.done(p, r.compute());
    }
    std::vector<Bf16> host(4 * 16 * 64);
    r.copy_d2h(r.compute(), reinterpret_cast<std::byte*>(host.data()), out, rt::CopyKind::other, "read back");
    const rt::RunReport rep = r.finish();
    seen[sched].push_back(host);
    syncs[sched] = rep.counters.blocking_syncs;
    EXPECT_EQ(rep.counters.weight_tiles, 4u);
    EXPECT_EQ(rep.counters.h2d(rt::CopyKind::weights), 4u * 16 * 64 * 2);
  }
  EXPECT_EQ(seen[0], seen[1]);
  const auto whole = psi::synthinit::make(kW, kShape, 7);
  EXPECT_EQ(seen[0][0], whole.data);
  // Each schedule reuses both staging buffers once (2 host waits) and finishes with one sync.
  EXPECT_EQ(syncs[0], 3u);
  EXPECT_EQ(syncs[1], 3u);
}

TEST(Validate, CrossStreamScratchNeedsAnEvent) {
  rt::Runtime r(config(true));
  const rt::DeviceRegion x = r.scratch_alloc(1024, "op", -1, "x");
  r.launch(r.compute(), "produce x", {rt::writes(x)}, [](const rt::KernelContext&) {});
  EXPECT_EQ(violation_of([&] { r.launch(r.copy(), "consume x", {rt::reads(x)}, [](const rt::KernelContext&) {}); }),
            "validate: consume x on stream copy reads scratch x while its write by produce x on stream compute is not "
            "ordered before it (missing event wait)");
  rt::Runtime ok(config(true));
  const rt::DeviceRegion y = ok.scratch_alloc(1024, "op", -1, "y");
  const rt::Event e = ok.create_event();
  ok.launch(ok.compute(), "produce y", {rt::writes(y)}, [](const rt::KernelContext&) {});
  ok.record(e, ok.compute());
  ok.wait(ok.copy(), e);
  ok.launch(ok.copy(), "consume y", {rt::reads(y)}, [](const rt::KernelContext&) {});
  ok.finish();
}

TEST(Validate, HostMayNotRewriteABufferAnInFlightCopyReads) {
  rt::Runtime r(config(true));
  rt::HostBuffer buf = r.allocate_pinned(1024, "staging");
  const rt::DeviceRegion x = r.scratch_alloc(1024, "op", -1, "x");
  r.copy_h2d(r.compute(), x, buf.data, rt::CopyKind::other, "upload x");
  EXPECT_EQ(violation_of([&] { r.host_access("refill staging", buf.data, 1024, rt::AccessMode::write); }),
            "validate: refill staging on stream host writes refill staging while its read by upload x on stream "
            "compute is not ordered before it (missing event wait)");
  rt::Runtime ok(config(true));
  rt::HostBuffer buf2 = ok.allocate_pinned(1024, "staging");
  const rt::DeviceRegion y = ok.scratch_alloc(1024, "op", -1, "y");
  ok.copy_h2d(ok.compute(), y, buf2.data, rt::CopyKind::other, "upload y");
  ok.host_wait(ok.compute());
  ok.host_access("refill staging", buf2.data, 1024, rt::AccessMode::write);
}

TEST(Validate, ExecuteTimeCheckSeesAnOperationStartBeforeItsDependency) {
  // The enqueue-time order says B is after A; if the backend ran B first anyway, the
  // execute-time check reports it.
  rt::Validator v(true);
  const int a = v.add_lane("a"), b = v.add_lane("b");
  const int e = v.add_event();
  const rt::TrackedAccess w{rt::Space::device, 0, 256, rt::AccessMode::write, "x"};
  const rt::TrackedAccess rd{rt::Space::device, 0, 256, rt::AccessMode::read, "x"};
  rt::Hooks ha = v.enqueue(a, "A", {w});
  v.record(e, a);
  v.wait(b, e);
  rt::Hooks hb = v.enqueue(b, "B", {rd});
  EXPECT_EQ(violation_of([&] { hb.before(); }),
            "validate: B on stream b started before A on stream a finished (an event did not order them)");
  ha.before();
  ha.after();
  hb.before();
  hb.after();
}
