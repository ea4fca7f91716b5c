#include "engine/runtime/pages.h"

#include <algorithm>

#include "engine/runtime/run_failure.h"

namespace psi::rt {

std::string_view page_state_name(PageState s) {
  switch (s) {
    case PageState::free: return "free";
    case PageState::filling: return "filling";
    case PageState::ready: return "ready";
    case PageState::consuming: return "consuming";
  }
  return "?";
}

std::string WeightSlice::describe() const {
  std::string s = op;
  if (tile >= 0) s += " tile " + std::to_string(tile);
  return s + " (" + tensor + " " + ckpt::slice_str(slice) + ")";
}

WeightPages::WeightPages(Runtime& rt) : rt_(rt) {
  for (int i = 0; i < 2; ++i) {
    Page& p = pages_[std::size_t(i)];
    p.whole = rt.layout().page_region(i);
    p.staging = rt.allocate_pinned(rt.layout().page, "staging of page " + std::to_string(i));
    p.copy_done = rt.create_event();
    p.consumed = rt.create_event();
  }
  rt_.add_listener(this);
}

WeightPages::~WeightPages() { rt_.remove_listener(this); }

void WeightPages::violation(int page, const std::string& what) {
  // Raised while the caller enqueues: already enqueued work must not outlive the unwinding.
  rt_.drain();
  throw ScheduleViolation("page " + std::to_string(page) + ": " + what);
}

DeviceRegion WeightPages::region(int page) const {
  const Page& p = pages_.at(std::size_t(page));
  if (p.state == PageState::free) return p.whole;
  return DeviceRegion{p.whole.offset, p.slice.bytes(), p.whole.name};
}

int WeightPages::acquire(std::string_view op) {
  const int page = turn_;
  const Page& p = pages_[std::size_t(page)];
  if (p.state != PageState::free)
    violation(page, "acquired by " + std::string(op) + " while " + std::string(page_state_name(p.state)) + " with " +
                        p.slice.describe() + " (release it first)");
  turn_ ^= 1;
  return page;
}

void WeightPages::fill(int page, Stream s, const ckpt::WeightSource& source, const WeightSlice& w) {
  Page& p = pages_.at(std::size_t(page));
  if (p.state != PageState::free)
    violation(page, "slice request for " + w.describe() + " while " + std::string(page_state_name(p.state)) + " with " +
                        p.slice.describe() + " (one outstanding request per page)");
  const std::uint64_t bytes = w.bytes();
  if (bytes > rt_.layout().page)
    rt_.fail(Outcome::tile_exceeds_page, "weight tile of " + std::to_string(bytes) + " bytes exceeds page size " +
                                             std::to_string(rt_.layout().page) + ": " + w.describe());
  // A host-resident slice is copied straight out of the source's memory; any other is staged.
  const std::byte* from = reinterpret_cast<const std::byte*>(source.resident(w.tensor, w.slice));
  if (!from) {
    // The staging buffer is reused: its previous copy into the page must have run.
    if (p.copied_before) rt_.host_wait(p.copy_done);
    rt_.host_access("stage " + w.describe(), p.staging.data, bytes, AccessMode::write);
    source.read(w.tensor, w.slice,
                std::span<Bf16>(reinterpret_cast<Bf16*>(p.staging.data), std::size_t(w.slice.numel())));
    from = p.staging.data;
  }

  if (p.consumed_before && rt_.fault() != Fault::fill_skips_consumer_wait) rt_.wait(s, p.consumed);
  filling_self_ = page;
  try {
    rt_.copy_h2d(s, DeviceRegion{p.whole.offset, bytes, p.whole.name}, from, CopyKind::weights,
                 "fill page " + std::to_string(page) + " with " + w.describe());
  } catch (...) {
    filling_self_ = -1;
    throw;
  }
  filling_self_ = -1;
  rt_.record(p.copy_done, s);
  p.copied_before = true;
  p.state = PageState::filling;
  p.slice = w;
  p.ready_on.clear();
  p.readers.clear();
  ++rt_.counters().weight_tiles;
}

void WeightPages::ready(int page, Stream consumer) {
  Page& p = pages_.at(std::size_t(page));
  if (p.state == PageState::free) violation(page, "made ready on stream " + std::string(rt_.stream_name(consumer)) + " with no slice request");
  if (rt_.fault() != Fault::consume_skips_copy_wait) rt_.wait(consumer, p.copy_done);
  if (std::find(p.ready_on.begin(), p.ready_on.end(), consumer.id) == p.ready_on.end()) p.ready_on.push_back(consumer.id);
  if (p.state == PageState::filling) p.state = PageState::ready;
}

void WeightPages::release(int page, Stream consumer) {
  Page& p = pages_.at(std::size_t(page));
  if (p.state == PageState::free) violation(page, "released while free");
  if (p.state == PageState::filling)
    violation(page, "released while filling with " + p.slice.describe() + " (its copy event was never waited on)");
  for (int r : p.readers)
    if (r != consumer.id)
      violation(page, "released on stream " + std::string(rt_.stream_name(consumer)) + " but also read on stream " +
                          std::string(rt_.stream_name(Stream{r})));
  rt_.record(p.consumed, consumer);
  p.consumed_before = true;
  p.state = PageState::free;
}

void WeightPages::before_access(Stream stream, std::string_view op, const Access& a) {
  for (int i = 0; i < 2; ++i) {
    Page& p = pages_[std::size_t(i)];
    if (!a.region.overlaps(p.whole)) continue;
    if (a.mode == AccessMode::write) {
      if (filling_self_ != i) violation(i, "written by " + std::string(op) + "; only a slice request may write a page");
      continue;
    }
    const std::string who = std::string(op) + " on stream " + std::string(rt_.stream_name(stream));
    if (p.state == PageState::free) violation(i, "read by " + who + " while free (no slice requested)");
    if (std::find(p.ready_on.begin(), p.ready_on.end(), stream.id) == p.ready_on.end())
      violation(i, "read by " + who + " while " + std::string(page_state_name(p.state)) +
                       ": that stream did not wait on its copy event");
    p.state = PageState::consuming;
    if (std::find(p.readers.begin(), p.readers.end(), stream.id) == p.readers.end()) p.readers.push_back(stream.id);
  }
}

WeightPager::WeightPager(Runtime& rt, const ckpt::WeightSource& source, CopySchedule schedule)
    : rt_(rt), source_(source), schedule_(schedule) {}

void WeightPager::push(WeightSlice w) { plan_.push_back(std::move(w)); }

void WeightPager::prefetch_front() {
  WeightPages& pages = rt_.pages();
  const int p = pages.acquire(plan_.front().op);
  pages.fill(p, rt_.copy(), source_, plan_.front());
  in_flight_ = p;
}

int WeightPager::next(Stream consumer) {
  if (plan_.empty()) throw ScheduleViolation("weight pager: next() with no tile pushed");
  WeightPages& pages = rt_.pages();
  if (schedule_ == CopySchedule::on_compute) {
    const int p = pages.acquire(plan_.front().op);
    pages.fill(p, consumer, source_, plan_.front());
    plan_.pop_front();
    pages.ready(p, consumer);
    return p;
  }
  if (in_flight_ < 0) prefetch_front();
  const int p = in_flight_;
  in_flight_ = -1;
  plan_.pop_front();
  pages.ready(p, consumer);
  if (!plan_.empty() && pages.state(pages.turn()) == PageState::free) prefetch_front();
  return p;
}

void WeightPager::done(int page, Stream consumer) { rt_.pages().release(page, consumer); }

}  // namespace psi::rt
