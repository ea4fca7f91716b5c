#pragma once
// Validate mode: every access an operation declares (arena regions, pinned host buffers) is
// checked against the happens-before order that streams, events and host waits establish.
//
// Enqueue-time check (every backend): each stream, each event and the host carry a vector
// clock; an operation X on stream s is ordered after operation Y iff X's clock has reached
// Y's sequence number on Y's stream. Each byte range remembers its last writer and its readers
// since; reading a range whose last writer is not ordered before, or writing a range whose last
// writer or readers are not, is a ScheduleViolation naming the operation, the region and the
// other operation. The check is deterministic: it does not depend on timing.
//
// Execute-time check (backends that run hooks: the CPU backend): when an operation starts, the
// operations it depended on must actually have finished; this checks the backend's events.
#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/backend/region.h"

namespace psi::rt {

enum class Space { device, host };

struct TrackedAccess {
  Space space;
  std::uint64_t begin;  // arena offset, or host address
  std::uint64_t bytes;
  AccessMode mode;
  std::string name;     // the region's name, for messages
};

class Validator {
 public:
  static constexpr int kHost = 0;  // the host thread's lane; streams are 1, 2, ...
  static constexpr int kMaxLanes = 64;

  explicit Validator(bool execute_checks) : execute_checks_(execute_checks) { add_lane("host"); }

  int add_lane(std::string name);  // a stream; returns its lane
  int add_event();                 // returns the event's index

  // An operation enqueued on `lane` (or done by the host when lane == kHost, which then counts
  // as executed at once). Throws ScheduleViolation on a missing ordering; returns the hooks that
  // perform the execute-time check.
  Hooks enqueue(int lane, std::string_view op, const std::vector<TrackedAccess>& accesses);

  void record(int event, int lane);
  void wait(int lane, int event);
  void host_wait_event(int event);
  void host_wait_lane(int lane);

 private:
  struct OpInfo {
    int lane;
    std::uint64_t seq;
    std::string name;
    std::string lane_name;  // copied: worker threads read it while the host may add lanes
  };
  using OpPtr = std::shared_ptr<const OpInfo>;
  using Clock = std::vector<std::uint64_t>;
  struct Segment {
    std::uint64_t end;
    OpPtr writer;
    std::vector<OpPtr> readers;  // at most one per lane: a later read on a lane covers earlier ones
  };
  using Segments = std::map<std::uint64_t, Segment>;

  static bool ordered(const OpInfo& y, const Clock& c) { return c.size() > std::size_t(y.lane) && c[y.lane] >= y.seq; }
  static void join(Clock& into, const Clock& from);
  static void split_at(Segments& segs, std::uint64_t pos);
  void check_executed(const std::vector<OpPtr>& deps, const OpInfo& op) const;
  [[noreturn]] void violation(const OpInfo& x, const TrackedAccess& a, const OpInfo& y, bool y_wrote) const;

  bool execute_checks_;
  std::vector<std::string> lane_names_;
  std::vector<Clock> lane_clocks_;
  std::vector<Clock> event_clocks_;
  std::map<Space, Segments> spaces_;
  std::array<std::atomic<std::uint64_t>, kMaxLanes> done_{};  // highest finished seq per lane
};

}  // namespace psi::rt
