#pragma once
// The arena contract: one allocation of A bytes laid out as
//   [ page 0 (P) | page 1 (P) | workspace (W) | scratch (A - 2P - W) ]
// Pages hold streamed weight tiles, the workspace bounded per-operator temporaries, the
// scratch the live state. Scratch and workspace are stack allocators (LIFO frees or
// mark/reset) with high-water marks; the managed peak is 2P + the largest simultaneous
// scratch + workspace use.
#include <cstdint>
#include <string>
#include <string_view>

#include "engine/backend/region.h"

namespace psi::rt {

struct ArenaLayout {
  std::uint64_t arena = 0, page = 0, workspace = 0, scratch = 0;

  // Checks the settings (positive, multiples of kAlignment, pages + workspace inside the arena
  // with room for scratch); errors name the setting.
  static ArenaLayout make(std::int64_t arena_bytes, std::int64_t page_bytes, std::int64_t workspace_bytes);

  DeviceRegion page_region(int i) const;
  DeviceRegion workspace_region() const { return {2 * page, workspace, "workspace"}; }
  DeviceRegion scratch_region() const { return {2 * page + workspace, scratch, "scratch"}; }
};

// Shared by both stack allocators: bytes in use now and at the peak, pages included.
struct PeakMeter {
  std::uint64_t current = 0;
  std::uint64_t peak = 0;
  void add(std::uint64_t n) {
    current += n;
    if (current > peak) peak = current;
  }
  void sub(std::uint64_t n) { current -= n; }
};

class StackAllocator {
 public:
  struct Mark {
    std::uint64_t top;
  };

  // kind is "scratch" or "workspace" (the first word of the exhaustion message).
  StackAllocator(std::string kind, DeviceRegion space, PeakMeter& meter);

  // `bytes` rounded up to kAlignment. Throws RunFailure (scratch_exhausted or
  // workspace_exhausted) naming the operator, the tile (omitted when < 0) and the bytes.
  DeviceRegion allocate(std::uint64_t bytes, std::string_view op, int tile, std::string_view name);
  // Frees must come in LIFO order; anything else is a ScheduleViolation.
  void free(const DeviceRegion& r);
  Mark mark() const { return {top_}; }
  void reset(Mark m);

  std::uint64_t capacity() const { return space_.bytes; }
  std::uint64_t in_use() const { return top_; }
  std::uint64_t high_water() const { return high_water_; }

 private:
  std::string kind_;
  DeviceRegion space_;
  PeakMeter& meter_;
  std::uint64_t top_ = 0;
  std::uint64_t high_water_ = 0;
};

}  // namespace psi::rt
