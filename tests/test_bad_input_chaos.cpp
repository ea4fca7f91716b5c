// Timing faults: the transport property under the CPU backend's chaos mode for 64 seeds, and
// validate mode catching a dependency that is deliberately left out.
//
// The workload is a two-branch projection of the shape PSI runs: a video projection on the
// "compute" stream and an audio projection on an "audio" stream, both streaming their weight
// tiles through the two pages (one pager, tiles interleaved between the streams), inputs
// reloaded from and outputs committed to the host journal; the audio stream then halves its
// output in place, and compute waits on the audio stream's event to add it to the first
// audio-width columns of the video output (the join). Last, the audio stream reads its input
// buffer once more and a journal state is reloaded into that buffer for it. Projections are
// ops::linear on page-sized weight tiles. For the sync and async journal transports and both
// copy schedules, without chaos and with chaos seeds 1..64, the journal must hold exactly the
// bits of the same arithmetic run on the host with no runtime at all.
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <optional>

#include "engine/checkpoint/synth_source.h"
#include "engine/matrix.h"
#include "engine/ops/gemm.h"
#include "engine/runtime/journal_transport.h"
#include "engine/runtime/pages.h"
#include "engine/runtime/runtime.h"
#include "engine/synthinit.h"

namespace rt = psi::rt;
using psi::Bf16;

namespace {

constexpr int T = 8;    // tokens
constexpr int Dv = 64;  // video width (input and output)
constexpr int Da = 32;  // audio width (input and output)
constexpr int R = 16;   // weight rows per tile (one page)
constexpr std::uint64_t kSeed = 23;
constexpr int kChaosSeeds = 64;
const std::string kWv = "transformer_blocks.0.attn1.to_out.0.weight";
const std::string kWa = "transformer_blocks.0.audio_attn1.to_out.0.weight";

psi::Bf16Tensor input(int width, int salt) {
  psi::Bf16Tensor x({T, width});
  for (std::size_t i = 0; i < x.data.size(); ++i)
    x.data[i] = psi::bf16_rne(float(int((i * 13 + std::size_t(salt)) % 17) - 8) * 0.125f);
  return x;
}

// The audio stream's in-place step: y = bf(y / 2).
void halve(std::span<Bf16> y) {
  for (Bf16& v : y) v = psi::bf16_rne(v.to_float() * 0.5f);
}

// The join: z[i][j] = bf(yv[i][j] + ya[i][j]) for j < Da.
void join(psi::CBf16Mat yv, psi::CBf16Mat ya, psi::Bf16Mat z) {
  for (int i = 0; i < T; ++i)
    for (int j = 0; j < Da; ++j) z.at(i, j) = psi::bf16_rne(yv.at(i, j).to_float() + ya.at(i, j).to_float());
}

struct Outputs {
  std::vector<Bf16> yv, ya, z;  // row-major [T, Dv], [T, Da], [T, Da]
  std::vector<Bf16> again;      // video tile 0 ([T, R]) after a second trip through the journal
  std::vector<Bf16> xa_copy;    // the audio input as the audio stream's last read saw it
};

Outputs host_reference() {
  const auto wv = psi::synthinit::make(kWv, {Dv, Dv}, kSeed), wa = psi::synthinit::make(kWa, {Da, Da}, kSeed);
  const auto yv = psi::ops::linear(input(Dv, 1), wv, nullptr), ya = psi::ops::linear(input(Da, 2), wa, nullptr);
  psi::Bf16Tensor halved = ya, z({T, Da});
  halve(halved.span());
  join(psi::as_matrix(yv), psi::as_matrix(halved), psi::as_matrix(z));
  std::vector<Bf16> again(T * R);
  for (int i = 0; i < T; ++i)
    for (int j = 0; j < R; ++j) again[std::size_t(i * R + j)] = yv.data[std::size_t(i * Dv + j)];
  return {yv.data, ya.data, z.data, again, input(Da, 2).data};
}

struct Plan {
  rt::JournalTransportKind transport = rt::JournalTransportKind::sync;
  rt::CopySchedule schedule = rt::CopySchedule::on_compute;
  std::optional<std::uint64_t> chaos;
  rt::Fault fault = rt::Fault::none;
  bool skip_join_wait = false;  // the workload's own missing dependency
  // A small async ring (3 slots of 160 bytes) splits each 256-byte tile across slots and
  // recycles them, and recycling waits on the host; a large one (16 x 256) never waits before
  // flush(), so the streams stay unsynchronized with the host.
  bool large_ring = false;
};

rt::JournalKey key(int block, rt::Branch b, const std::string& role, int tile = 0) { return {block, b, role, tile}; }

Outputs run(const Plan& s) {
  rt::RuntimeConfig c;
  c.arena_bytes = 32 * 1024;
  c.page_bytes = R * Dv * 2;  // one video tile; an audio tile uses half a page
  c.workspace_bytes = 1024;
  c.live_bytes = (T * Dv + T * Da) * 2 * 2 + 2 * T * Da * 2;
  c.validate = true;
  c.chaos_seed = s.chaos;
  c.chaos_max_us = 20;
  c.fault = s.fault;
  rt::Runtime r(c);
  rt::HostJournal journal;
  rt::JournalTransport jt(r, journal, s.transport,
                          s.large_ring ? rt::AsyncRingConfig{.slots = 16, .slot_bytes = 256}
                                       : rt::AsyncRingConfig{.slots = 3, .slot_bytes = 160});
  psi::ckpt::SynthSource source(kSeed, {{kWv, {Dv, Dv}}, {kWa, {Da, Da}}});
  rt::WeightPager pager(r, source, s.schedule);
  const rt::Stream video = r.compute(), audio = r.create_stream("audio");

  const psi::Bf16Tensor xv = input(Dv, 1), xa = input(Da, 2);
  journal.put(key(0, rt::Branch::video, "x"), xv.shape, xv.data);
  journal.put(key(0, rt::Branch::audio, "x"), xa.shape, xa.data);
  const rt::DeviceRegion Xv = r.scratch_alloc(T * Dv * 2, "chaos", -1, "Xv");
  const rt::DeviceRegion Xa = r.scratch_alloc(T * Da * 2, "chaos", -1, "Xa");
  // Outputs are tile-major: tile t's [T, R] block is contiguous, so it can be committed alone.
  const rt::DeviceRegion Yv = r.scratch_alloc(T * Dv * 2, "chaos", -1, "Yv");
  const rt::DeviceRegion Ya = r.scratch_alloc(T * Da * 2, "chaos", -1, "Ya");
  const rt::DeviceRegion Z = r.scratch_alloc(T * Da * 2, "chaos", -1, "Z");
  const rt::DeviceRegion Xc = r.scratch_alloc(T * Da * 2, "chaos", -1, "Xa copy");
  jt.reload(key(0, rt::Branch::video, "x"), Xv, video);
  jt.reload(key(0, rt::Branch::audio, "x"), Xa, audio);

  struct Tile {
    rt::Stream stream;
    rt::Branch branch;
    int t, width;
    const std::string* weight;
    rt::DeviceRegion x, y;
  };
  // Interleaved so that consecutive pages go to different streams.
  const std::vector<Tile> tiles = {{video, rt::Branch::video, 0, Dv, &kWv, Xv, Yv}, {audio, rt::Branch::audio, 0, Da, &kWa, Xa, Ya},
                                   {video, rt::Branch::video, 1, Dv, &kWv, Xv, Yv}, {audio, rt::Branch::audio, 1, Da, &kWa, Xa, Ya},
                                   {video, rt::Branch::video, 2, Dv, &kWv, Xv, Yv}, {video, rt::Branch::video, 3, Dv, &kWv, Xv, Yv}};
  for (const Tile& t : tiles) pager.push({*t.weight, {R * t.t, R * t.t + R, 0, t.width}, "proj", t.t});
  const std::uint64_t tile_bytes = T * R * 2;
  for (const Tile& t : tiles) {
    const int p = pager.next(t.stream);
    const rt::DeviceRegion page = r.pages().region(p);
    const rt::DeviceRegion y = t.y.sub(std::uint64_t(t.t) * tile_bytes, tile_bytes, t.y.name);
    const rt::DeviceRegion x = t.x;
    const int width = t.width;
    r.launch(t.stream, (t.branch == rt::Branch::video ? "video proj tile " : "audio proj tile ") + std::to_string(t.t),
             {rt::reads(page), rt::reads(x), rt::writes(y)}, [=](const rt::KernelContext& k) {
               const psi::CBf16Mat xm{rt::host_view<const Bf16>(k, x).data(), T, width, width};
               const psi::CBf16Mat wm{rt::host_view<const Bf16>(k, page).data(), R, width, width};
               psi::ops::linear(xm, wm, nullptr, psi::BiasRule::fused_f32,
                                psi::Bf16Mat{rt::host_view<Bf16>(k, y).data(), T, R, R});
             });
    pager.done(p, t.stream);
    jt.commit(key(1, t.branch, "y", t.t), y, {T, R}, t.stream);
  }

  r.launch(audio, "audio halve", {rt::writes(Ya)}, [=](const rt::KernelContext& k) { halve(rt::host_view<Bf16>(k, Ya)); });
  const rt::Event audio_done = r.create_event();
  r.record(audio_done, audio);
  if (!s.skip_join_wait) r.wait(video, audio_done);
  r.launch(video, "join", {rt::reads(Yv), rt::reads(Ya), rt::writes(Z)}, [=](const rt::KernelContext& k) {
    // Gather the tile-major outputs into [T, width] row-major views, then join.
    auto gather = [&](const rt::DeviceRegion& y, int width) {
      psi::Bf16Tensor m({T, width});
      const auto v = rt::host_view<const Bf16>(k, y);
      for (int t = 0; t < width / R; ++t)
        for (int i = 0; i < T; ++i)
          for (int j = 0; j < R; ++j) m.data[std::size_t(i * width + t * R + j)] = v[std::size_t((t * T + i) * R + j)];
      return m;
    };
    const auto yv = gather(Yv, Dv), ya = gather(Ya, Da);
    join(psi::as_matrix(yv), psi::as_matrix(ya), psi::Bf16Mat{rt::host_view<Bf16>(k, Z).data(), T, Da, Da});
  });
  jt.commit(key(2, rt::Branch::video, "z"), Z, {T, Da}, video);
  // The next layer's pattern: the audio stream reads Xa again, then a state is reloaded into Xa
  // for it (the reload must wait for that read), and committed again.
  r.launch(audio, "audio copy x", {rt::reads(Xa), rt::writes(Xc)}, [=](const rt::KernelContext& k) {
    const auto from = rt::host_view<const Bf16>(k, Xa);
    std::copy(from.begin(), from.end(), rt::host_view<Bf16>(k, Xc).begin());
  });
  const rt::DeviceRegion again = Xa.sub(0, tile_bytes, Xa.name);
  jt.reload(key(1, rt::Branch::video, "y", 0), again, audio);
  jt.commit(key(3, rt::Branch::video, "again"), again, {T, R}, audio);
  jt.commit(key(3, rt::Branch::audio, "x copy"), Xc, {T, Da}, audio);
  jt.flush();
  r.finish();

  Outputs out{std::vector<Bf16>(T * Dv), std::vector<Bf16>(T * Da), journal.get(key(2, rt::Branch::video, "z")).data,
              journal.get(key(3, rt::Branch::video, "again")).data, journal.get(key(3, rt::Branch::audio, "x copy")).data};
  for (const Tile& t : tiles) {
    const auto& d = journal.get(key(1, t.branch, "y", t.t)).data;
    auto& y = t.branch == rt::Branch::video ? out.yv : out.ya;
    for (int i = 0; i < T; ++i)
      for (int j = 0; j < R; ++j) y[std::size_t(i * t.width + t.t * R + j)] = d[std::size_t(i * R + j)];
  }
  return out;
}

std::string describe(const Plan& s) {
  return std::string(s.transport == rt::JournalTransportKind::sync ? "sync" : s.large_ring ? "async large ring" : "async small ring") +
         (s.schedule == rt::CopySchedule::prefetch ? " prefetch" : " on-compute") +
         (s.chaos ? " chaos seed " + std::to_string(*s.chaos) : " no chaos");
}

std::string violation_of(const Plan& s) {
  try {
    run(s);
  } catch (const rt::ScheduleViolation& e) {
    return e.what();
  }
  return "no violation";
}

}  // namespace

TEST(Chaos, EveryScheduleAndSeedGivesTheHostBits) {
  const Outputs expect = host_reference();
  ASSERT_NE(expect.z, std::vector<Bf16>(expect.z.size()));  // not trivially zero
  int runs = 0;
  for (auto [transport, large_ring] : {std::pair{rt::JournalTransportKind::sync, false},
                                       std::pair{rt::JournalTransportKind::async, false},
                                       std::pair{rt::JournalTransportKind::async, true}})
    for (auto schedule : {rt::CopySchedule::on_compute, rt::CopySchedule::prefetch})
      for (int seed = 0; seed <= kChaosSeeds; ++seed) {
        Plan s;
        s.transport = transport;
        s.schedule = schedule;
        s.large_ring = large_ring;
        if (seed > 0) s.chaos = std::uint64_t(seed);
        const Outputs got = run(s);
        ASSERT_EQ(got.yv, expect.yv) << describe(s);
        ASSERT_EQ(got.ya, expect.ya) << describe(s);
        ASSERT_EQ(got.z, expect.z) << describe(s);
        ASSERT_EQ(got.again, expect.again) << describe(s);
        ASSERT_EQ(got.xa_copy, expect.xa_copy) << describe(s);
        ++runs;
      }
  std::printf("psi-chaos: %d runs (3 transports x 2 schedules x (no chaos + %d chaos seeds)) bitwise equal to the host\n",
              runs, kChaosSeeds);
}

// Validate mode's check happens at enqueue time, so it does not depend on the chaos seed; each
// removed dependency is caught for every seed tried. The async journal transport is used
// throughout: the sync transport's host waits after every copy order everything enqueued later,
// which (rightly) hides a missing event wait.
TEST(Chaos, ValidateModeCatchesEachRemovedDependency) {
  using K = rt::JournalTransportKind;
  using S = rt::CopySchedule;
  struct Fault {
    std::string name;
    Plan plan;
    std::string expect;  // the violation message
  };
  const std::string w0 = "transformer_blocks.0.attn1.to_out.0.weight";
  const std::vector<Fault> faults = {
      {"join without the audio event", {K::async, S::on_compute, {}, rt::Fault::none, true},
       "validate: join on stream compute reads scratch Ya while its write by audio halve on stream audio is not "
       "ordered before it (missing event wait)"},
      {"fill skips consumer wait", {K::async, S::prefetch, {}, rt::Fault::fill_skips_consumer_wait},
       "validate: fill page 0 with proj tile 1 (" + w0 + " rows [16, 32) cols [0, 64)) on stream copy writes page 0 "
       "while its read by video proj tile 0 on stream compute is not ordered before it (missing event wait)"},
      {"consume skips copy wait", {K::async, S::prefetch, {}, rt::Fault::consume_skips_copy_wait},
       "validate: video proj tile 0 on stream compute reads page 0 while its write by fill page 0 with proj tile 0 (" + w0 +
           " rows [0, 16) cols [0, 64)) on stream copy is not ordered before it (missing event wait)"},
      {"commit skips producer wait", {K::async, S::on_compute, {}, rt::Fault::commit_skips_producer_wait},
       "validate: journal commit block 1 video y tile 0 on stream journal reads scratch Yv while its write by video "
       "proj tile 0 on stream compute is not ordered before it (missing event wait)"},
      {"reload skips consumer wait", {K::async, S::prefetch, {}, rt::Fault::reload_skips_consumer_wait},
       "validate: journal reload block 1 video y tile 0 (from the ring) on stream journal writes scratch Xa while its "
       "read by audio copy x on stream audio is not ordered before it (missing event wait)"},
  };
  for (const Fault& f : faults)
    for (std::uint64_t seed : {1u, 2u, 3u}) {
      Plan s = f.plan;
      s.chaos = seed;
      s.large_ring = true;
      EXPECT_EQ(violation_of(s), f.expect) << f.name << " seed " << seed;
    }
}
