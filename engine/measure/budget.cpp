#include "engine/measure/budget.h"

#include "engine/backend/backend_factory.h"
#include "engine/error.h"
#include "engine/measure/sizes.h"

namespace psi::rt {
namespace {

std::string amount(std::uint64_t bytes) { return std::to_string(bytes) + " bytes (" + format_amount(bytes) + ")"; }

// The reservation on a backend's device.
class ServicesReservationDevice final : public ReservationDevice {
 public:
  explicit ServicesReservationDevice(std::unique_ptr<DeviceServices> device) : device_(std::move(device)) {}
  std::string name() const override { return device_->name(); }
  DeviceMemory memory() override { return device_->memory(); }
  void* allocate(std::uint64_t bytes) override { return device_->reserve(bytes); }
  void release(void* block) noexcept override { device_->release(block); }

 private:
  std::unique_ptr<DeviceServices> device_;
};

}  // namespace

std::uint64_t first_reservation(const DeviceMemory& m, std::uint64_t pool, std::string_view device) {
  if (pool == 0) throw Error("fixed budget: the pool must be positive (got 0 bytes)");
  if (m.free < pool)
    throw Error("fixed budget: " + std::string(device) + " has " + amount(m.free) + " free of " +
                    format_amount(m.total) + ", less than the requested pool of " + amount(pool) +
                    "; nothing reserved",
                Exit::run_failed);
  return (m.free - pool) / kReservationGranule * kReservationGranule;
}

std::optional<std::uint64_t> next_reservation(std::uint64_t size, std::uint64_t free_after, std::uint64_t pool) {
  if (free_after < pool) {
    if (size == 0) return std::nullopt;  // nothing left to give back
    const std::uint64_t shortfall = pool - free_after;
    const std::uint64_t back = (shortfall + kReservationGranule - 1) / kReservationGranule * kReservationGranule;
    return size > back ? size - back : 0;
  }
  const std::uint64_t spare = (free_after - pool) / kReservationGranule * kReservationGranule;
  if (spare == 0) return std::nullopt;
  return size + spare;
}

PoolReservation::PoolReservation(std::unique_ptr<ReservationDevice> device, std::uint64_t pool)
    : device_(std::move(device)) {
  const std::string name = device_->name();
  ReservationReport& r = report_;
  r.pool_requested = pool;
  const DeviceMemory before = device_->memory();
  r.free_before = before.free;
  r.device_total = before.total;
  std::uint64_t size = first_reservation(before, pool, name);
  try {
    for (int attempt = 1;; ++attempt) {
      if (size > 0) block_ = device_->allocate(size);
      r.attempts = attempt;
      r.reserved_bytes = size;
      r.pool_after = device_->memory().free;
      const auto next = next_reservation(size, r.pool_after, pool);
      if (!next || attempt == kReservationAttempts) break;
      if (block_) device_->release(block_);
      block_ = nullptr;
      size = *next;
    }
    if (r.pool_after < pool)
      throw Error("fixed budget: a reservation of " + amount(r.reserved_bytes) + " on " + name + " leaves " +
                      amount(r.pool_after) + " free, less than the requested pool of " + amount(pool) + " (" +
                      std::to_string(r.attempts) + " sizes tried; the device had " + amount(r.free_before) +
                      " free before)",
                  Exit::run_failed);
  } catch (...) {
    if (block_) device_->release(block_);
    block_ = nullptr;
    throw;
  }
  r.made = true;
  r.status = "reserved " + format_amount(r.reserved_bytes) + " on " + name + ", leaving a pool of " +
             format_amount(r.pool_after) + " (requested " + format_amount(pool) + ")";
}

PoolReservation::~PoolReservation() {
  if (block_) device_->release(block_);
}

FixedBudget::FixedBudget(std::string_view backend, std::uint64_t pool, int device) {
  DeviceServicesChoice d = make_device_services(backend, device);
  if (d.services) {
    reservation_ = std::make_unique<PoolReservation>(std::make_unique<ServicesReservationDevice>(std::move(d.services)), pool);
    return;
  }
  if (d.has_device)
    throw Error("fixed budget: backend " + std::string(backend) + " but " + d.why, Exit::run_failed);
  not_applicable_.pool_requested = pool;
  not_applicable_.status = "not applicable on the " + std::string(backend) +
                           " backend: it has no device memory to reserve";
}

FixedBudget::~FixedBudget() = default;

const ReservationReport& FixedBudget::report() const {
  return reservation_ ? reservation_->report() : not_applicable_;
}

}  // namespace psi::rt
