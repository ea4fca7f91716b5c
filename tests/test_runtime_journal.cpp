// The host journal and its two transports: byte-exact round trips, counters, residency and its
// invalidation, chunking through the async ring.
#include <gtest/gtest.h>

#include <cstring>

#include "engine/runtime/journal_transport.h"
#include "engine/runtime/runtime.h"

namespace rt = psi::rt;
using psi::Bf16;

namespace {

rt::RuntimeConfig config(std::optional<std::uint64_t> chaos = std::nullopt) {
  rt::RuntimeConfig c;
  c.arena_bytes = 64 * 1024;
  c.page_bytes = 4 * 1024;
  c.workspace_bytes = 4 * 1024;
  c.live_bytes = 48 * 1024;
  c.validate = true;
  c.chaos_seed = chaos;
  return c;
}

std::vector<Bf16> pattern(std::size_t n, int salt) {
  std::vector<Bf16> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = Bf16::from_bits(std::uint16_t(i * 2654435761u + std::size_t(salt) * 977u));
  return v;
}

// Puts host values into a region on `s` (via a pinned buffer the caller keeps alive).
void upload(rt::Runtime& r, rt::Stream s, const rt::DeviceRegion& dst, const rt::HostBuffer& buf,
            const std::vector<Bf16>& v) {
  r.host_access("stage upload", buf.data, v.size() * 2, rt::AccessMode::write);
  std::memcpy(buf.data, v.data(), v.size() * 2);
  r.copy_h2d(s, dst, buf.data, rt::CopyKind::other, "upload " + dst.name);
}

std::vector<Bf16> download(rt::Runtime& r, rt::Stream s, const rt::DeviceRegion& src) {
  std::vector<Bf16> v(src.bytes / 2);
  r.copy_d2h(s, reinterpret_cast<std::byte*>(v.data()), src, rt::CopyKind::other, "download " + src.name);
  r.host_wait(s);
  return v;
}

const rt::JournalKey kKey{2, rt::Branch::audio, "ffn.h", 1};

}  // namespace

TEST(Journal, KeyNamesAndUnknownKeys) {
  EXPECT_EQ(kKey.str(), "block 2 audio ffn.h tile 1");
  rt::HostJournal j;
  try {
    j.get(kKey);
    FAIL();
  } catch (const psi::Error& e) {
    EXPECT_STREQ(e.what(), "journal: no entry for block 2 audio ffn.h tile 1");
  }
}

TEST(Journal, RoundTripIsByteExactInBothTransports) {
  const psi::Shape shape{10, 100};  // 2000 bytes: several chunks of the async ring's 768-byte slots
  const auto values = pattern(1000, 1);
  for (auto kind : {rt::JournalTransportKind::sync, rt::JournalTransportKind::async}) {
    SCOPED_TRACE(kind == rt::JournalTransportKind::sync ? "sync" : "async");
    rt::Runtime r(config());
    rt::HostJournal j;
    rt::JournalTransport t(r, j, kind, {.slots = 2, .slot_bytes = 768});
    rt::HostBuffer buf = r.allocate_pinned(2000, "upload");
    const rt::DeviceRegion a = r.scratch_alloc(2000, "test", -1, "a");
    const rt::DeviceRegion b = r.scratch_alloc(2000, "test", -1, "b");
    upload(r, r.compute(), a, buf, values);
    t.commit(kKey, a, shape, r.compute());
    t.reload(kKey, b, r.compute());
    EXPECT_EQ(download(r, r.compute(), b.sub(0, 2000, "b")), values);
    t.flush();
    EXPECT_EQ(j.get(kKey).shape, shape);
    EXPECT_EQ(j.get(kKey).data, values);
    const rt::RunReport rep = r.finish();
    EXPECT_EQ(rep.counters.journal_commits, 1u);
    EXPECT_EQ(rep.counters.journal_reloads, 1u);
    EXPECT_EQ(rep.counters.d2h(rt::CopyKind::journal), 2000u);
    EXPECT_EQ(rep.counters.h2d(rt::CopyKind::journal), 2000u);
    EXPECT_EQ(rep.counters.journal_host_bytes, 2000u);
    EXPECT_EQ(rep.device_allocations, 1u);
  }
}

TEST(Journal, AsyncKeepsCommittedStateResidentUntilItsRegionIsWritten) {
  const psi::Shape shape{512};
  const auto values = pattern(512, 2);
  rt::Runtime r(config());
  rt::HostJournal j;
  rt::JournalTransport t(r, j, rt::JournalTransportKind::async, {.slots = 3, .slot_bytes = 256});
  rt::HostBuffer buf = r.allocate_pinned(1024, "upload");
  const rt::DeviceRegion a = r.scratch_alloc(1024, "test", -1, "a");
  upload(r, r.compute(), a, buf, values);
  t.commit(kKey, a, shape, r.compute());
  t.reload(kKey, a, r.compute());  // still resident: no copy
  EXPECT_EQ(r.counters().journal_kept_resident, 1u);
  EXPECT_EQ(r.counters().journal_reloads, 0u);
  EXPECT_EQ(r.counters().resident_bytes_peak, 1024u);

  // An in-place update of `a` (while the commit's D2H may still be reading it) must wait for that
  // copy, and ends the residency: the journal holds the committed value, not the update.
  r.launch(r.compute(), "negate a", {rt::reads(a), rt::writes(a)}, [a](const rt::KernelContext& k) {
    for (Bf16& x : rt::host_view<Bf16>(k, a)) x = Bf16::from_bits(std::uint16_t(x.bits ^ 0x8000u));
  });
  t.reload(kKey, a, r.compute());
  EXPECT_EQ(r.counters().journal_reloads, 1u);
  EXPECT_EQ(download(r, r.compute(), a), values);
  t.flush();
  EXPECT_EQ(j.get(kKey).data, values);
  r.finish();
}

TEST(Journal, AsyncReloadFromTheRingBeforeTheHostCommit) {
  // The reload is enqueued while the commit's chunks may still sit in the ring: it must still
  // deliver the committed bytes.
  const psi::Shape shape{4, 128};
  const auto values = pattern(512, 3);
  for (std::uint64_t seed = 1; seed <= 10; ++seed) {
    rt::Runtime r(config(seed));
    rt::HostJournal j;
    rt::JournalTransport t(r, j, rt::JournalTransportKind::async, {.slots = 4, .slot_bytes = 256});
    rt::HostBuffer buf = r.allocate_pinned(1024, "upload");
    const rt::DeviceRegion a = r.scratch_alloc(1024, "test", -1, "a");
    const rt::DeviceRegion b = r.scratch_alloc(1024, "test", -1, "b");
    upload(r, r.compute(), a, buf, values);
    t.commit(kKey, a, shape, r.compute());
    t.reload(kKey, b, r.compute());
    ASSERT_EQ(download(r, r.compute(), b), values) << "seed " << seed;
    t.flush();
    ASSERT_EQ(j.get(kKey).data, values) << "seed " << seed;
    r.finish();
  }
}

TEST(Journal, AsyncReloadWaitsForTheDestinationsEarlierReaders) {
  // A kernel reads `a`, then the journal reloads another value into `a` on its own stream: the
  // copy must wait for the kernel. With that wait removed (test-only fault), validate mode says so.
  for (auto fault : {rt::Fault::none, rt::Fault::reload_skips_consumer_wait}) {
    rt::RuntimeConfig c = config();
    c.fault = fault;
    rt::Runtime r(c);
    rt::HostJournal j;
    rt::JournalTransport t(r, j, rt::JournalTransportKind::async);
    const rt::DeviceRegion a = r.scratch_alloc(512, "test", -1, "a");
    j.put(kKey, {256}, pattern(256, 4));
    r.launch(r.compute(), "read a", {rt::reads(a)}, [](const rt::KernelContext&) {});
    std::string got = "no violation";
    try {
      t.reload(kKey, a, r.compute());
    } catch (const rt::ScheduleViolation& e) {
      got = e.what();
    }
    if (fault == rt::Fault::none) {
      EXPECT_EQ(got, "no violation");
      EXPECT_EQ(download(r, r.compute(), a), pattern(256, 4));
    } else {
      EXPECT_EQ(got, "validate: journal reload block 2 audio ffn.h tile 1 on stream journal writes scratch a while its "
                     "read by read a on stream compute is not ordered before it (missing event wait)");
    }
  }
}

TEST(Journal, SyncTransportBlocksPerCopy) {
  rt::Runtime r(config());
  rt::HostJournal j;
  rt::JournalTransport t(r, j, rt::JournalTransportKind::sync);
  const rt::DeviceRegion a = r.scratch_alloc(512, "test", -1, "a");
  r.launch(r.compute(), "zero a", {rt::writes(a)}, [a](const rt::KernelContext& k) {
    std::memset(k.arena_base + a.offset, 0, a.bytes);
  });
  const std::uint64_t before = r.counters().blocking_syncs;
  t.commit(kKey, a, {256}, r.compute());
  t.reload(kKey, a, r.compute());
  EXPECT_EQ(r.counters().blocking_syncs - before, 2u);
  EXPECT_EQ(r.counters().journal_kept_resident, 0u);
  EXPECT_EQ(j.get(kKey).data, std::vector<Bf16>(256));
  r.finish();
}

TEST(Journal, RegionTooSmallIsAnError) {
  rt::Runtime r(config());
  rt::HostJournal j;
  rt::JournalTransport t(r, j, rt::JournalTransportKind::async);
  const rt::DeviceRegion a = r.scratch_alloc(256, "test", -1, "a");
  try {
    t.commit(kKey, a, {1024}, r.compute());
    FAIL();
  } catch (const psi::Error& e) {
    EXPECT_STREQ(e.what(), "journal commit of block 2 audio ffn.h tile 1: shape [1024] needs 2048 bytes but scratch a holds 256");
  }
}
