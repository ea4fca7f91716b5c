#pragma once
// The fixed-budget mode (issue 7): before a run, and so before its arena, one reservation
// allocation takes all of the device's free memory except the requested pool and is held until
// the run ends. Everything the run then allocates on the device has to fit in that pool.
//
// The sizing is pure logic over free-memory figures (first_reservation, next_reservation) and
// PoolReservation drives it through a ReservationDevice, so both are tested on the CPU with a
// simulated device; FixedBudget takes the backend's device services (engine/backend/device.h)
// or says the mode does not apply.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "engine/backend/device.h"

namespace psi::rt {

inline constexpr std::uint64_t kDefaultPoolBytes = std::uint64_t(3) << 30;  // 3 GiB

// CUDA hands out device memory in 2 MiB granules, so a reservation is a whole number of them
// and the pool it leaves is the requested one to within a granule, never less.
inline constexpr std::uint64_t kReservationGranule = std::uint64_t(2) << 20;
// Sizes tried before the pool left is accepted as measured (each try frees and reallocates).
inline constexpr int kReservationAttempts = 4;

// All free memory above the pool, rounded down to whole granules (0: nothing to reserve).
// psi::Error (exit 3) naming the device and both amounts when the device has less free memory
// than the pool; psi::Error (exit 2) for a pool of 0.
std::uint64_t first_reservation(const DeviceMemory& m, std::uint64_t pool, std::string_view device);

// A reservation of `size` bytes left `free_after` free. Returns the size to try instead — smaller
// when the pool came out short (the allocation took more than its size), larger when a whole
// granule or more above the pool is left — or nullopt when the pool left is in
// [pool, pool + granule).
std::optional<std::uint64_t> next_reservation(std::uint64_t size, std::uint64_t free_after, std::uint64_t pool);

struct ReservationReport {
  bool made = false;   // a reservation was held for the run
  std::string status;  // one line
  std::uint64_t pool_requested = 0;
  std::uint64_t reserved_bytes = 0;  // the reservation allocation's size
  std::uint64_t free_before = 0;     // free device memory before it
  std::uint64_t pool_after = 0;      // free device memory measured right after it: the run's pool
  std::uint64_t device_total = 0;
  int attempts = 0;  // allocations made to reach the pool
};

// What the reservation needs from a device (a backend's device services, or a simulated device
// in the tests).
class ReservationDevice {
 public:
  virtual ~ReservationDevice() = default;
  virtual std::string name() const = 0;
  virtual DeviceMemory memory() = 0;
  virtual void* allocate(std::uint64_t bytes) = 0;  // psi::Error when it fails
  virtual void release(void* block) noexcept = 0;
};

// Reserves at construction (psi::Error when the pool cannot be left), releases at destruction.
class PoolReservation {
 public:
  PoolReservation(std::unique_ptr<ReservationDevice> device, std::uint64_t pool);
  ~PoolReservation();
  PoolReservation(const PoolReservation&) = delete;
  PoolReservation& operator=(const PoolReservation&) = delete;

  const ReservationReport& report() const { return report_; }

 private:
  std::unique_ptr<ReservationDevice> device_;
  void* block_ = nullptr;
  ReservationReport report_;
};

// The fixed-budget mode for a run on `backend` (resolved: "cpu" or "cuda"): on a backend with a
// device, a PoolReservation on its device number `device` (psi::Error, exit 3, when this build
// lacks the backend); on the CPU backend nothing is reserved and the report says the mode is not
// applicable there (the CPU backend has no device memory).
class FixedBudget {
 public:
  FixedBudget(std::string_view backend, std::uint64_t pool, int device = 0);
  ~FixedBudget();
  FixedBudget(const FixedBudget&) = delete;
  FixedBudget& operator=(const FixedBudget&) = delete;

  const ReservationReport& report() const;

 private:
  std::unique_ptr<PoolReservation> reservation_;
  ReservationReport not_applicable_;
};

}  // namespace psi::rt
