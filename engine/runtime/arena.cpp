#include "engine/runtime/arena.h"

#include "engine/runtime/run_failure.h"
#include "engine/measure/sizes.h"

namespace psi::rt {
namespace {

std::uint64_t checked_size(std::string_view setting, std::int64_t v) {
  const std::string s(setting);
  if (v <= 0) throw Error(s + " must be positive (got " + std::to_string(v) + ")");
  if (std::uint64_t(v) % kAlignment != 0)
    throw Error(s + " " + std::to_string(v) + " is not a multiple of the " + std::to_string(kAlignment) +
                "-byte alignment");
  return std::uint64_t(v);
}

}  // namespace

ArenaLayout ArenaLayout::make(std::int64_t arena_bytes, std::int64_t page_bytes, std::int64_t workspace_bytes) {
  ArenaLayout l;
  l.arena = checked_size("arena_bytes", arena_bytes);
  l.page = checked_size("page_bytes", page_bytes);
  l.workspace = checked_size("workspace_bytes", workspace_bytes);
  // Compare without overflow: 2P + W < A.
  if (l.page > l.arena / 2 || l.workspace >= l.arena - 2 * l.page)
    throw Error("page_bytes " + std::to_string(l.page) + " x 2 + workspace_bytes " + std::to_string(l.workspace) +
                " leave no scratch in arena_bytes " + std::to_string(l.arena));
  l.scratch = l.arena - 2 * l.page - l.workspace;
  return l;
}

DeviceRegion ArenaLayout::page_region(int i) const {
  return DeviceRegion{std::uint64_t(i) * page, page, "page " + std::to_string(i)};
}

StackAllocator::StackAllocator(std::string kind, DeviceRegion space, PeakMeter& meter)
    : kind_(std::move(kind)), space_(std::move(space)), meter_(meter) {}

DeviceRegion StackAllocator::allocate(std::uint64_t bytes, std::string_view op, int tile, std::string_view name) {
  const std::uint64_t n = align_up(bytes);
  const std::uint64_t free_bytes = space_.bytes - top_;
  if (n > free_bytes || n < bytes) {
    std::string who(op);
    if (tile >= 0) who += " tile " + std::to_string(tile);
    throw RunFailure(kind_ == "scratch" ? Outcome::scratch_exhausted : Outcome::workspace_exhausted,
                     kind_ + " exhausted: " + who + " needs " + format_amount(bytes) + ", " +
                         format_amount(free_bytes) + " free of " + format_capacity(space_.bytes));
  }
  DeviceRegion r{space_.offset + top_, n, kind_ + " " + std::string(name)};
  top_ += n;
  if (top_ > high_water_) high_water_ = top_;
  meter_.add(n);
  return r;
}

void StackAllocator::free(const DeviceRegion& r) {
  if (r.end() != space_.offset + top_ || r.offset < space_.offset)
    throw ScheduleViolation(kind_ + ": " + r.name + " freed out of LIFO order (it is not the most recent allocation)");
  top_ -= r.bytes;
  meter_.sub(r.bytes);
}

void StackAllocator::reset(Mark m) {
  if (m.top > top_) throw ScheduleViolation(kind_ + ": reset to a mark above the current top");
  meter_.sub(top_ - m.top);
  top_ = m.top;
}

}  // namespace psi::rt
