#pragma once
// How a run ends, and the typed errors a run fails with. Resource outcomes (scratch or
// workspace exhausted, a weight tile larger than a page, the measured peak over the declared
// bound, a fixed budget's cap that the run's allocations would pass) are clean failures of the run,
// never crashes; schedule violations (a broken page
// lifecycle, a missing event wait found by validate mode) are programming errors in an
// operator's schedule.
#include <string>
#include <string_view>

#include "engine/error.h"

namespace psi::rt {

enum class Outcome { complete, scratch_exhausted, workspace_exhausted, tile_exceeds_page, bound_exceeded, cap_exceeded };

constexpr std::string_view outcome_name(Outcome o) {
  switch (o) {
    case Outcome::complete: return "complete";
    case Outcome::scratch_exhausted: return "scratch_exhausted";
    case Outcome::workspace_exhausted: return "workspace_exhausted";
    case Outcome::tile_exceeds_page: return "tile_exceeds_page";
    case Outcome::bound_exceeded: return "bound_exceeded";
    case Outcome::cap_exceeded: return "cap_exceeded";
  }
  return "?";
}

class RunFailure : public Error {
 public:
  RunFailure(Outcome outcome, const std::string& msg) : Error(msg, Exit::run_failed), outcome_(outcome) {}
  Outcome outcome() const { return outcome_; }

 private:
  Outcome outcome_;
};

class ScheduleViolation : public Error {
 public:
  explicit ScheduleViolation(const std::string& msg) : Error(msg, Exit::run_failed) {}
};

}  // namespace psi::rt
