#include "engine/runtime/validator.h"

#include <algorithm>

#include "engine/runtime/run_failure.h"

namespace psi::rt {

int Validator::add_lane(std::string name) {
  if (lane_names_.size() >= std::size_t(kMaxLanes))
    throw ScheduleViolation("validate: more than " + std::to_string(kMaxLanes) + " streams");
  lane_names_.push_back(std::move(name));
  lane_clocks_.emplace_back(lane_names_.size(), 0);
  return int(lane_names_.size() - 1);
}

int Validator::add_event() {
  event_clocks_.emplace_back();
  return int(event_clocks_.size() - 1);
}

void Validator::join(Clock& into, const Clock& from) {
  if (into.size() < from.size()) into.resize(from.size(), 0);
  for (std::size_t i = 0; i < from.size(); ++i) into[i] = std::max(into[i], from[i]);
}

void Validator::split_at(Segments& segs, std::uint64_t pos) {
  auto it = segs.upper_bound(pos);
  if (it == segs.begin()) return;
  --it;
  if (it->first < pos && pos < it->second.end) {
    Segment tail = it->second;
    it->second.end = pos;
    segs.emplace(pos, std::move(tail));
  }
}

[[noreturn]] void Validator::violation(const OpInfo& x, const TrackedAccess& a, const OpInfo& y, bool y_wrote) const {
  throw ScheduleViolation("validate: " + x.name + " on stream " + x.lane_name + " " +
                          (a.mode == AccessMode::read ? "reads " : "writes ") + a.name + " while its " +
                          (y_wrote ? "write" : "read") + " by " + y.name + " on stream " + y.lane_name +
                          " is not ordered before it (missing event wait)");
}

Hooks Validator::enqueue(int lane, std::string_view op, const std::vector<TrackedAccess>& accesses) {
  Clock& c = lane_clocks_.at(std::size_t(lane));
  // Work the host enqueues is ordered after everything the host did or waited for before.
  if (lane != kHost) join(c, lane_clocks_[kHost]);
  if (c.size() <= std::size_t(lane)) c.resize(std::size_t(lane) + 1, 0);
  auto x = std::make_shared<OpInfo>(OpInfo{lane, ++c[lane], std::string(op), lane_names_[lane]});

  // Check every access before recording any, so that an operation that reads and writes the
  // same bytes does not conflict with itself.
  std::vector<OpPtr> deps;
  for (const TrackedAccess& a : accesses) {
    if (a.bytes == 0) continue;
    Segments& segs = spaces_[a.space];
    split_at(segs, a.begin);
    split_at(segs, a.begin + a.bytes);
    for (auto it = segs.lower_bound(a.begin); it != segs.end() && it->first < a.begin + a.bytes; ++it) {
      const Segment& s = it->second;
      if (s.writer) {
        if (!ordered(*s.writer, c)) violation(*x, a, *s.writer, true);
        deps.push_back(s.writer);
      }
      if (a.mode == AccessMode::write)
        for (const OpPtr& r : s.readers) {
          if (!ordered(*r, c)) violation(*x, a, *r, false);
          deps.push_back(r);
        }
    }
  }
  for (const TrackedAccess& a : accesses) {
    if (a.bytes == 0) continue;
    Segments& segs = spaces_[a.space];
    // Fill gaps so that every byte of the access has a segment to record in.
    std::uint64_t pos = a.begin;
    const std::uint64_t end = a.begin + a.bytes;
    for (auto it = segs.lower_bound(a.begin); pos < end;) {
      const std::uint64_t next = (it != segs.end() && it->first < end) ? it->first : end;
      if (pos < next) segs.emplace(pos, Segment{next, nullptr, {}});
      if (it == segs.end() || it->first >= end) break;
      pos = it->second.end;
      ++it;
    }
    for (auto it = segs.lower_bound(a.begin); it != segs.end() && it->first < end; ++it) {
      Segment& s = it->second;
      if (a.mode == AccessMode::write) {
        s.writer = x;
        s.readers.clear();
      } else {
        std::erase_if(s.readers, [&](const OpPtr& r) { return r->lane == lane; });
        s.readers.push_back(x);
      }
    }
  }

  if (lane == kHost) {
    done_[kHost].store(x->seq);
    return {};
  }
  if (!execute_checks_) return {};
  std::erase_if(deps, [&](const OpPtr& d) { return d->lane == lane; });  // stream order covers these
  Hooks h;
  h.before = [this, deps = std::move(deps), x] { check_executed(deps, *x); };
  h.after = [this, x] { done_[x->lane].store(x->seq); };
  return h;
}

void Validator::check_executed(const std::vector<OpPtr>& deps, const OpInfo& op) const {
  for (const OpPtr& d : deps)
    if (done_[d->lane].load() < d->seq)
      throw ScheduleViolation("validate: " + op.name + " on stream " + op.lane_name + " started before " +
                              d->name + " on stream " + d->lane_name + " finished (an event did not order them)");
}

void Validator::record(int event, int lane) {
  Clock& c = lane_clocks_.at(std::size_t(lane));
  join(c, lane_clocks_[kHost]);
  event_clocks_.at(std::size_t(event)) = c;
}

void Validator::wait(int lane, int event) { join(lane_clocks_.at(std::size_t(lane)), event_clocks_.at(std::size_t(event))); }

void Validator::host_wait_event(int event) { join(lane_clocks_[kHost], event_clocks_.at(std::size_t(event))); }

void Validator::host_wait_lane(int lane) { join(lane_clocks_[kHost], lane_clocks_.at(std::size_t(lane))); }

}  // namespace psi::rt
