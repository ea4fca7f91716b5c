// The fixed-budget reservation without a GPU: its sizing, the reservation driven through a
// simulated device (granules, allocation overhead, a device too small, memory taken by others),
// what the CPU backend reports, the --pool amounts, and the reservation in a run's report.
#include <gtest/gtest.h>

#include <map>

#include "engine/error.h"
#include "engine/backend/backend_factory.h"
#include "engine/measure/budget.h"
#include "engine/runtime/run_report.h"
#include "engine/measure/sizes.h"

namespace rt = psi::rt;

namespace {

constexpr std::uint64_t KiB = 1024, MiB = 1024 * KiB, GiB = 1024 * MiB;
constexpr std::uint64_t G = rt::kReservationGranule;

template <class F>
psi::Error caught(F&& f) {
  try {
    f();
  } catch (const psi::Error& e) {
    return e;
  }
  ADD_FAILURE() << "expected psi::Error";
  return psi::Error("none");
}

// A device that hands out whole granules plus a fixed overhead per allocation, and whose free
// memory can change behind psi's back (other processes) every time it is read after the first.
struct SimState {
  std::uint64_t free = 0, total = 0;
  std::uint64_t overhead = 0;
  std::uint64_t taken_by_others_per_read = 0, freed_by_others_per_read = 0;
  int reads = 0;
  std::map<void*, std::uint64_t> live;
  int allocations = 0;
  bool fail_allocation = false;
};

class SimDevice final : public rt::ReservationDevice {
 public:
  explicit SimDevice(SimState& s) : s_(s) {}
  std::string name() const override { return "simulated device"; }
  rt::DeviceMemory memory() override {
    if (s_.reads++ > 0) s_.free = s_.free - std::min(s_.free, s_.taken_by_others_per_read) + s_.freed_by_others_per_read;
    return {s_.free, s_.total};
  }
  void* allocate(std::uint64_t bytes) override {
    if (s_.fail_allocation) throw psi::Error("simulated: out of memory", psi::Exit::run_failed);
    const std::uint64_t used = (bytes + G - 1) / G * G + s_.overhead;
    if (used > s_.free) throw psi::Error("simulated: out of memory", psi::Exit::run_failed);
    s_.free -= used;
    ++s_.allocations;
    void* p = reinterpret_cast<void*>(std::uintptr_t(0x1000) * std::uintptr_t(s_.allocations));
    s_.live[p] = used;
    return p;
  }
  void release(void* block) noexcept override {
    s_.free += s_.live.at(block);
    s_.live.erase(block);
  }

 private:
  SimState& s_;
};

}  // namespace

TEST(Budget, FirstReservationTakesWholeGranulesAboveThePool) {
  EXPECT_EQ(rt::first_reservation({10 * GiB + 5 * MiB + 123, 16 * GiB}, 3 * GiB, "d"), 7 * GiB + 4 * MiB);
  EXPECT_EQ(rt::first_reservation({3 * GiB, 16 * GiB}, 3 * GiB, "d"), 0u);
  EXPECT_EQ(rt::first_reservation({3 * GiB + G - 1, 16 * GiB}, 3 * GiB, "d"), 0u);
}

TEST(Budget, LessFreeThanThePoolIsAClearError) {
  const psi::Error e = caught([] { rt::first_reservation({2 * GiB, 80 * GiB}, 3 * GiB, "CUDA device 0"); });
  EXPECT_STREQ(e.what(),
               "fixed budget: CUDA device 0 has 2147483648 bytes (2.0 GiB) free of 80.0 GiB, less than the requested "
               "pool of 3221225472 bytes (3.0 GiB); nothing reserved");
  EXPECT_EQ(e.code(), psi::Exit::run_failed);
  const psi::Error z = caught([] { rt::first_reservation({2 * GiB, 80 * GiB}, 0, "CUDA device 0"); });
  EXPECT_STREQ(z.what(), "fixed budget: the pool must be positive (got 0 bytes)");
  EXPECT_EQ(z.code(), psi::Exit::bad_input);
}

TEST(Budget, NextReservationConvergesOnThePool) {
  const std::uint64_t pool = 3 * GiB, size = 70 * GiB;
  EXPECT_EQ(rt::next_reservation(size, pool, pool), std::nullopt);
  EXPECT_EQ(rt::next_reservation(size, pool + G - 1, pool), std::nullopt);
  EXPECT_EQ(rt::next_reservation(size, pool - 1, pool), size - G);           // short by a byte: one granule back
  EXPECT_EQ(rt::next_reservation(size, pool - G - 1, pool), size - 2 * G);   // short by more than a granule
  EXPECT_EQ(rt::next_reservation(size, pool + 5 * MiB, pool), size + 4 * MiB);  // whole spare granules taken
  EXPECT_EQ(rt::next_reservation(G, pool - 3 * G, pool), 0u);                // cannot give back more than it holds
  EXPECT_EQ(rt::next_reservation(0, pool - 1, pool), std::nullopt);          // nothing left to give back
}

TEST(Budget, ReservationLeavesThePoolAndReleasesAtTheEnd) {
  SimState s;
  s.total = 80 * GiB;
  s.free = 79 * GiB + 1 * MiB;
  {
    rt::PoolReservation r(std::make_unique<SimDevice>(s), 3 * GiB);
    const rt::ReservationReport& v = r.report();
    EXPECT_TRUE(v.made);
    EXPECT_EQ(v.attempts, 1);
    EXPECT_EQ(v.reserved_bytes, 76 * GiB);
    EXPECT_EQ(v.free_before, 79 * GiB + 1 * MiB);
    EXPECT_EQ(v.pool_after, 3 * GiB + 1 * MiB);
    EXPECT_EQ(v.pool_requested, 3 * GiB);
    EXPECT_EQ(v.device_total, 80 * GiB);
    EXPECT_EQ(v.status, "reserved 76.0 GiB on simulated device, leaving a pool of 3.0 GiB (requested 3.0 GiB)");
    EXPECT_EQ(s.live.size(), 1u);
  }
  EXPECT_TRUE(s.live.empty());
  EXPECT_EQ(s.free, 79 * GiB + 1 * MiB);
}

TEST(Budget, AnAllocationOverheadIsGivenBackAGranuleAtATime) {
  SimState s;
  s.total = 80 * GiB;
  s.free = 40 * GiB;  // (free - pool) is whole granules, so the overhead makes the first pool short
  s.overhead = 64 * KiB;
  rt::PoolReservation r(std::make_unique<SimDevice>(s), 3 * GiB);
  const rt::ReservationReport& v = r.report();
  EXPECT_EQ(v.attempts, 2);
  EXPECT_EQ(v.reserved_bytes, 37 * GiB - G);
  EXPECT_GE(v.pool_after, 3 * GiB);
  EXPECT_LT(v.pool_after, 3 * GiB + G);
  EXPECT_EQ(v.pool_after, s.free);
  EXPECT_EQ(s.live.size(), 1u);  // the short first try was released
}

TEST(Budget, ADeviceWithTooLittleFreeMemoryReservesNothing) {
  SimState s;
  s.total = 16 * GiB;
  s.free = 1 * GiB;
  const psi::Error e = caught([&] { rt::PoolReservation r(std::make_unique<SimDevice>(s), 3 * GiB); });
  EXPECT_STREQ(e.what(),
               "fixed budget: simulated device has 1073741824 bytes (1.0 GiB) free of 16.0 GiB, less than the "
               "requested pool of 3221225472 bytes (3.0 GiB); nothing reserved");
  EXPECT_EQ(s.allocations, 0);
}

TEST(Budget, APoolThatCannotBeLeftFailsAndReleasesEverything) {
  SimState s;
  s.total = 80 * GiB;
  s.free = 20 * GiB;
  s.taken_by_others_per_read = 64 * MiB;  // another process keeps allocating
  const psi::Error e = caught([&] { rt::PoolReservation r(std::make_unique<SimDevice>(s), 19 * GiB + 960 * MiB); });
  EXPECT_EQ(e.code(), psi::Exit::run_failed);
  EXPECT_TRUE(std::string(e.what()).starts_with("fixed budget: a reservation of ")) << e.what();
  EXPECT_NE(std::string(e.what()).find("less than the requested pool of 21407727616 bytes (19.9 GiB) (2 sizes tried"),
            std::string::npos)
      << e.what();
  EXPECT_TRUE(s.live.empty());
}

TEST(Budget, ADeviceThatKeepsMovingIsAcceptedAsMeasuredAfterTheLastTry) {
  SimState s;
  s.total = 80 * GiB;
  s.free = 40 * GiB;
  s.freed_by_others_per_read = 10 * MiB;  // another process keeps freeing
  rt::PoolReservation r(std::make_unique<SimDevice>(s), 3 * GiB);
  const rt::ReservationReport& v = r.report();
  EXPECT_TRUE(v.made);
  EXPECT_EQ(v.attempts, rt::kReservationAttempts);
  EXPECT_EQ(v.reserved_bytes, 37 * GiB + 30 * MiB);
  EXPECT_EQ(v.pool_after, 3 * GiB + 10 * MiB);  // reported as measured, not as requested
  EXPECT_EQ(s.live.size(), 1u);
}

TEST(Budget, AFailedAllocationPropagatesWithNothingHeld) {
  SimState s;
  s.total = 80 * GiB;
  s.free = 40 * GiB;
  s.fail_allocation = true;
  const psi::Error e = caught([&] { rt::PoolReservation r(std::make_unique<SimDevice>(s), 3 * GiB); });
  EXPECT_STREQ(e.what(), "simulated: out of memory");
  EXPECT_TRUE(s.live.empty());
}

TEST(Budget, NotApplicableOnTheCpuBackend) {
  rt::FixedBudget b("cpu", 3 * GiB);
  EXPECT_FALSE(b.report().made);
  EXPECT_EQ(b.report().pool_requested, 3 * GiB);
  EXPECT_EQ(b.report().status, "not applicable on the cpu backend: it has no device memory to reserve");
  const auto j = rt::to_json(b.report());
  EXPECT_EQ(j["made"], false);
  EXPECT_TRUE(j["reserved_bytes"].is_null());
  EXPECT_TRUE(j["pool_after_bytes"].is_null());
  EXPECT_EQ(j["pool_requested_bytes"], 3 * GiB);
}

// With a CUDA device (the device machine) the reservation is real and leaves at least the pool;
// without one it is a one-line error, never a made-up reservation. On the device the pool is half
// of what is free, so that CUDA tests running beside this one keep room; since they may allocate
// and free meanwhile, only "at least the pool" is checked here (the fixed-budget run checks the
// pool on an otherwise idle device).
TEST(Budget, CudaReservesThePoolOrSaysWhyNot) {
  std::string why;
  if (rt::cuda_devices(&why) > 0) {
    const std::uint64_t pool = rt::make_device_services("cuda", 0).services->memory().free / 2;
    rt::FixedBudget b("cuda", pool);
    const rt::ReservationReport& v = b.report();
    EXPECT_TRUE(v.made) << v.status;
    EXPECT_GE(v.pool_after, pool) << v.status;
    EXPECT_GT(v.reserved_bytes, 0u) << v.status;
  } else {
    const psi::Error e = caught([&] { rt::FixedBudget b("cuda", 1 * GiB); });
    EXPECT_EQ(e.code(), psi::Exit::run_failed);
    EXPECT_TRUE(std::string(e.what()).starts_with("fixed budget: ")) << e.what();
  }
}

TEST(Budget, TheReservationAppearsInTheRunReport) {
  rt::RunReport r;
  r.backend = "cuda";
  rt::ReservationReport v;
  v.made = true;
  v.status = "reserved 136.0 GiB on CUDA device 0, leaving a pool of 3.0 GiB (requested 3.0 GiB)";
  v.pool_requested = 3 * GiB;
  v.reserved_bytes = 136 * GiB;
  v.free_before = 139 * GiB;
  v.pool_after = 3 * GiB;
  v.device_total = 140 * GiB;
  v.attempts = 1;
  r.reservation = v;
  const auto j = rt::to_json(r);
  EXPECT_EQ(j["reservation"]["reserved_bytes"], 136 * GiB);
  EXPECT_EQ(j["reservation"]["pool_after_bytes"], 3 * GiB);
  EXPECT_EQ(j["reservation"]["free_before_bytes"], 139 * GiB);
  EXPECT_EQ(j["reservation"]["device_total_bytes"], 140 * GiB);
  EXPECT_EQ(j["reservation"]["attempts"], 1);
  EXPECT_TRUE(rt::summary(r).ends_with("; fixed budget: " + v.status)) << rt::summary(r);
}

TEST(Capacity, ParsesWholeAmountsWithUnits) {
  EXPECT_EQ(rt::parse_capacity("3GiB", "--pool"), 3 * GiB);
  EXPECT_EQ(rt::parse_capacity("3 GiB", "--pool"), 3 * GiB);
  EXPECT_EQ(rt::parse_capacity("512MiB", "--pool"), 512 * MiB);
  EXPECT_EQ(rt::parse_capacity("64KiB", "--pool"), 64 * KiB);
  EXPECT_EQ(rt::parse_capacity("4096", "--pool"), 4096u);
  EXPECT_EQ(rt::parse_capacity("4096 bytes", "--pool"), 4096u);
  EXPECT_EQ(rt::parse_capacity("7B", "--pool"), 7u);
  EXPECT_STREQ(caught([] { rt::parse_capacity("3G", "--pool"); }).what(),
               "--pool '3G': unknown unit 'G' (expected a whole number with an optional unit: bytes, KiB, MiB, GiB)");
  EXPECT_STREQ(caught([] { rt::parse_capacity("1.5GiB", "--pool"); }).what(),
               "--pool '1.5GiB': unknown unit '.5GiB' (expected a whole number with an optional unit: bytes, KiB, MiB, "
               "GiB)");
  EXPECT_STREQ(caught([] { rt::parse_capacity("", "--pool"); }).what(),
               "--pool '': no number (expected a whole number with an optional unit: bytes, KiB, MiB, GiB)");
  EXPECT_STREQ(caught([] { rt::parse_capacity("-1", "--pool"); }).what(),
               "--pool '-1': no number (expected a whole number with an optional unit: bytes, KiB, MiB, GiB)");
  EXPECT_STREQ(caught([] { rt::parse_capacity("18446744073709551616", "--pool"); }).what(),
               "--pool '18446744073709551616': too large (expected a whole number with an optional unit: bytes, KiB, "
               "MiB, GiB)");
  EXPECT_STREQ(caught([] { rt::parse_capacity("17179869184GiB", "--pool"); }).what(),
               "--pool '17179869184GiB': too large (expected a whole number with an optional unit: bytes, KiB, MiB, "
               "GiB)");
}
