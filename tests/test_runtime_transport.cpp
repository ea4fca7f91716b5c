// Transport property: the same arithmetic gives bitwise-equal states whatever the schedule.
// A chain of three dependent matmul-like steps (the second with a residual add) streams its
// weights through the two pages from a SynthInit source and passes its state through the host
// journal. Run under the sync and async journal transports, with and without weight prefetch,
// in chaos mode for 20 seeds each, the journal must hold exactly the host reference's bits. The
// same chain with one dependency removed (a test-only fault) must be caught.
#include <gtest/gtest.h>

#include <functional>

#include "engine/checkpoint/synth_source.h"
#include "engine/runtime/journal_transport.h"
#include "engine/runtime/pages.h"
#include "engine/runtime/runtime.h"
#include "engine/synthinit.h"

namespace rt = psi::rt;
using psi::Bf16;

namespace {

constexpr int D = 64;      // features (weights are [D, D])
constexpr int T = 8;       // tokens
constexpr int R = 16;      // weight rows per tile
constexpr int kTiles = D / R;
constexpr int kSteps = 3;
constexpr std::uint64_t kSeed = 11;
const std::string kWeights[kSteps] = {"transformer_blocks.0.ff.net.0.proj.weight", "transformer_blocks.0.ff.net.2.weight",
                                      "transformer_blocks.1.attn1.to_out.0.weight"};

// States are feature-major [D, T], so a tile of output features is contiguous. Step k, tile t:
// out[r][i] = bf(sum_j w[r][j] * in[j][i]) summed in ascending j in float32, plus (step 1 only)
// a residual: bf(that + in[R*t + r][i]).
void step_tile(int step, int t, std::span<const Bf16> w, std::span<const Bf16> in, std::span<Bf16> out) {
  for (int r = 0; r < R; ++r)
    for (int i = 0; i < T; ++i) {
      float acc = 0.0f;
      for (int j = 0; j < D; ++j) acc = acc + w[std::size_t(r * D + j)].to_float() * in[std::size_t(j * T + i)].to_float();
      float v = psi::bf(acc);
      if (step == 1) v = psi::bf(v + in[std::size_t((R * t + r) * T + i)].to_float());
      out[std::size_t(r * T + i)] = psi::bf16_rne(v);
    }
}

std::vector<Bf16> input() {
  std::vector<Bf16> x(D * T);
  for (int r = 0; r < D; ++r)
    for (int i = 0; i < T; ++i) x[std::size_t(r * T + i)] = psi::bf16_rne(float((r * 7 + i * 3) % 7 - 3));
  return x;
}

using States = std::vector<std::vector<Bf16>>;  // [step][D*T]

States host_reference() {
  States s;
  std::vector<Bf16> cur = input();
  for (int k = 0; k < kSteps; ++k) {
    const auto w = psi::synthinit::make(kWeights[k], {D, D}, kSeed);
    std::vector<Bf16> next(D * T);
    for (int t = 0; t < kTiles; ++t)
      step_tile(k, t, std::span(w.data).subspan(std::size_t(t * R * D), R * D), cur,
                std::span(next).subspan(std::size_t(t * R * T), R * T));
    s.push_back(next);
    cur = next;
  }
  return s;
}

struct Setup {
  rt::JournalTransportKind transport;
  rt::CopySchedule schedule;
  std::optional<std::uint64_t> chaos;
  rt::Fault fault = rt::Fault::none;
  bool validate = true;
};

struct Result {
  States states;
  rt::Counters counters;
  std::uint64_t device_allocations;
};

rt::JournalKey key(int block, int t) { return {block, rt::Branch::video, "state", t}; }

Result run_chain(const Setup& s) {
  rt::RuntimeConfig c;
  c.arena_bytes = 32 * 1024;
  c.page_bytes = 2 * 1024;  // one tile: 16 x 64 BF16
  c.workspace_bytes = 1024;
  c.live_bytes = 2 * D * T * 2;
  c.validate = s.validate;
  c.chaos_seed = s.chaos;
  c.chaos_max_us = 20;
  c.fault = s.fault;
  rt::Runtime r(c);
  rt::HostJournal journal;
  // 192-byte slots: each 256-byte state tile crosses two slots, and the three slots recycle.
  rt::JournalTransport jt(r, journal, s.transport, {.slots = 3, .slot_bytes = 192});
  std::map<std::string, psi::Shape, std::less<>> shapes;
  for (const auto& w : kWeights) shapes[w] = {D, D};
  psi::ckpt::SynthSource source(kSeed, shapes);
  rt::WeightPager pager(r, source, s.schedule);
  for (int k = 0; k < kSteps; ++k)
    for (int t = 0; t < kTiles; ++t) pager.push({kWeights[k], {R * t, R * t + R, 0, D}, "step " + std::to_string(k), t});

  const std::uint64_t tile_bytes = R * T * 2;
  const rt::DeviceRegion a = r.scratch_alloc(D * T * 2, "chain", -1, "A");
  const rt::DeviceRegion b = r.scratch_alloc(D * T * 2, "chain", -1, "B");
  const auto x = input();
  for (int t = 0; t < kTiles; ++t)
    journal.put(key(0, t), {R, T}, std::span(x).subspan(std::size_t(t * R * T), R * T));

  // Step 0 reads A (reloaded from the host), step 1 reloads its input into B, where step 0 left
  // it (resident under the async transport), step 2 reloads into B what step 1 wrote to A (a real
  // copy, which must wait for step 1's reads of B).
  const rt::DeviceRegion ins[kSteps] = {a, b, b}, outs[kSteps] = {b, a, a};
  const rt::Stream compute = r.compute();
  for (int k = 0; k < kSteps; ++k) {
    const rt::DeviceRegion in = ins[k], out = outs[k];
    for (int t = 0; t < kTiles; ++t)
      jt.reload(key(k, t), in.sub(std::uint64_t(t) * tile_bytes, tile_bytes, in.name), compute);
    for (int t = 0; t < kTiles; ++t) {
      const int p = pager.next(compute);
      const rt::DeviceRegion page = r.pages().region(p);
      const rt::DeviceRegion o = out.sub(std::uint64_t(t) * tile_bytes, tile_bytes, out.name);
      r.launch(compute, "step " + std::to_string(k) + " tile " + std::to_string(t),
               {rt::reads(page), rt::reads(in), rt::writes(o)}, [=](const rt::KernelContext& kc) {
                 step_tile(k, t, rt::host_view<const Bf16>(kc, page), rt::host_view<const Bf16>(kc, in),
                           rt::host_view<Bf16>(kc, o));
               });
      pager.done(p, compute);
      jt.commit(key(k + 1, t), o, {R, T}, compute);
    }
  }
  jt.flush();
  const rt::RunReport rep = r.finish();
  Result res{States(kSteps, std::vector<Bf16>(D * T)), rep.counters, rep.device_allocations};
  for (int k = 0; k < kSteps; ++k)
    for (int t = 0; t < kTiles; ++t) {
      const auto& e = journal.get(key(k + 1, t)).data;
      std::copy(e.begin(), e.end(), res.states[std::size_t(k)].begin() + t * R * T);
    }
  return res;
}

std::string violation_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const rt::ScheduleViolation& e) {
    return e.what();
  }
  return "no violation";
}

}  // namespace

TEST(Transport, EverySchedulePassesTheReferenceBitsUnderChaos) {
  const States expect = host_reference();
  // The chain is not trivial: each step changes the state, and the residual step differs from
  // a plain product.
  ASSERT_NE(expect[0], expect[1]);
  ASSERT_NE(expect[1], expect[2]);
  for (auto transport : {rt::JournalTransportKind::sync, rt::JournalTransportKind::async})
    for (auto schedule : {rt::CopySchedule::on_compute, rt::CopySchedule::prefetch})
      for (std::uint64_t seed = 1; seed <= 20; ++seed) {
        // Odd seeds run with validate mode (which also checks every start against its
        // dependencies), even seeds without, as a production run would.
        const Result res = run_chain({transport, schedule, seed, rt::Fault::none, seed % 2 == 1});
        const std::string where = std::string(transport == rt::JournalTransportKind::sync ? "sync" : "async") +
                                  (schedule == rt::CopySchedule::prefetch ? " prefetch" : " on-compute") + " seed " +
                                  std::to_string(seed);
        for (int k = 0; k < kSteps; ++k) ASSERT_EQ(res.states[std::size_t(k)], expect[std::size_t(k)]) << where << " step " << k;
        const rt::Counters& c = res.counters;
        ASSERT_EQ(res.device_allocations, 1u) << where;
        ASSERT_EQ(c.weight_tiles, 12u) << where;
        ASSERT_EQ(c.h2d(rt::CopyKind::weights), 12u * R * D * 2) << where;
        ASSERT_EQ(c.journal_commits, 12u) << where;
        ASSERT_EQ(c.d2h(rt::CopyKind::journal), 12u * R * T * 2) << where;
        if (transport == rt::JournalTransportKind::sync) {
          ASSERT_EQ(c.journal_reloads, 12u) << where;
          ASSERT_EQ(c.journal_kept_resident, 0u) << where;
        } else {
          ASSERT_EQ(c.journal_reloads, 8u) << where;       // step 1's input stayed resident
          ASSERT_EQ(c.journal_kept_resident, 4u) << where;
        }
        ASSERT_EQ(c.h2d(rt::CopyKind::journal), c.journal_reloads * R * T * 2) << where;
      }
}

TEST(Transport, EachRemovedDependencyIsCaught) {
  // The async transport is used so that no host wait of the journal orders the streams by
  // accident. (A reload that skips its destination's users cannot race in this chain: each
  // step's last commit already puts the journal stream behind every reader of the step's input;
  // test_runtime_journal covers that fault where it matters.)
  using K = rt::JournalTransportKind;
  using S = rt::CopySchedule;
  const std::string w0 = "transformer_blocks.0.ff.net.0.proj.weight";
  for (std::uint64_t seed : {1u, 2u, 3u}) {
    EXPECT_EQ(violation_of([&] { run_chain({K::async, S::prefetch, seed, rt::Fault::fill_skips_consumer_wait}); }),
              "validate: fill page 0 with step 0 tile 2 (" + w0 +
                  " rows [32, 48) cols [0, 64)) on stream copy writes page 0 while its read by step 0 tile 0 on stream "
                  "compute is not ordered before it (missing event wait)");
    EXPECT_EQ(violation_of([&] { run_chain({K::async, S::prefetch, seed, rt::Fault::consume_skips_copy_wait}); }),
              "validate: step 0 tile 0 on stream compute reads page 0 while its write by fill page 0 with step 0 tile 0 (" +
                  w0 + " rows [0, 16) cols [0, 64)) on stream copy is not ordered before it (missing event wait)");
    EXPECT_EQ(violation_of([&] { run_chain({K::async, S::on_compute, seed, rt::Fault::commit_skips_producer_wait}); }),
              "validate: journal commit block 1 video state tile 0 on stream journal reads scratch B while its write by "
              "step 0 tile 0 on stream compute is not ordered before it (missing event wait)");
  }
}

TEST(Transport, AFaultThatTheScheduleDoesNotNeedChangesNothing) {
  // With copies on the compute stream, stream order alone protects the pages: dropping the
  // event waits is harmless, and validate mode rightly reports nothing.
  const States expect = host_reference();
  for (auto fault : {rt::Fault::fill_skips_consumer_wait, rt::Fault::consume_skips_copy_wait}) {
    const Result res = run_chain({rt::JournalTransportKind::sync, rt::CopySchedule::on_compute, 5, fault});
    EXPECT_EQ(res.states, expect);
  }
}
