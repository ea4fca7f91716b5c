#include "engine/runtime/journal_transport.h"

#include <algorithm>
#include <cstring>

#include "engine/runtime/run_failure.h"

namespace psi::rt {
namespace {

std::byte* bytes_of(std::vector<Bf16>& v) { return reinterpret_cast<std::byte*>(v.data()); }
const std::byte* bytes_of(const std::vector<Bf16>& v) { return reinterpret_cast<const std::byte*>(v.data()); }

bool covers(const DeviceRegion& outer, const DeviceRegion& inner) {
  return outer.offset <= inner.offset && inner.end() <= outer.end();
}

}  // namespace

JournalTransport::JournalTransport(Runtime& rt, HostJournal& journal, JournalTransportKind kind, AsyncRingConfig ring)
    : rt_(rt), journal_(journal), kind_(kind), ring_config_(ring) {
  if (kind_ == JournalTransportKind::async) {
    if (ring.slots == 0) throw Error("journal ring: slots must be positive");
    if (ring.slot_bytes == 0 || ring.slot_bytes % 2 != 0)
      throw Error("journal ring: slot_bytes " + std::to_string(ring.slot_bytes) + " must be a positive multiple of 2");
    ring_ = rt_.allocate_pinned(ring.slots * ring.slot_bytes, "journal ring");
    stream_ = rt_.create_stream("journal");
    slots_.resize(ring.slots);
    for (std::size_t i = 0; i < ring.slots; ++i) {
      slots_[i].data = ring_.data + i * ring.slot_bytes;
      slots_[i].done = rt_.create_event();
    }
  }
  rt_.add_listener(this);
}

JournalTransport::~JournalTransport() {
  rt_.drain();  // ring copies may still be in flight when an error unwinds past the transport
  rt_.remove_listener(this);
}

Event JournalTransport::take_event() {
  if (spare_events_.empty()) return rt_.create_event();
  Event e = spare_events_.back();
  spare_events_.pop_back();
  return e;
}

// Safe at any time: a wait captures the event's recorded point when it is enqueued.
void JournalTransport::give_event(Event e) { spare_events_.push_back(e); }

JournalTransport::Slot& JournalTransport::acquire_slot() {
  Slot& s = slots_[next_slot_];
  next_slot_ = (next_slot_ + 1) % slots_.size();
  if (s.recorded) {
    rt_.host_wait(s.done);
    apply(s);
  }
  return s;
}

void JournalTransport::apply(Slot& s) {
  if (!s.pending) return;
  const Pending& p = *s.pending;
  HostJournal::Entry& e = journal_.get(p.key);
  rt_.host_access("journal host commit " + p.key.str(), s.data, p.bytes, AccessMode::read);
  std::memcpy(bytes_of(e.data) + p.offset, s.data, p.bytes);
  s.pending.reset();
}

void JournalTransport::set_resident(const JournalKey& key, const DeviceRegion& r, Stream s, Event e) {
  if (auto it = resident_.find(key); it != resident_.end()) drop_resident(it);
  resident_.emplace(key, Resident{r, s, e});
  resident_bytes_ += r.bytes;
  Counters& c = rt_.counters();
  c.resident_bytes_peak = std::max(c.resident_bytes_peak, resident_bytes_);
}

void JournalTransport::drop_resident(std::map<JournalKey, Resident>::iterator it) {
  resident_bytes_ -= it->second.region.bytes;
  give_event(it->second.event);
  resident_.erase(it);
}

void JournalTransport::commit(const JournalKey& key, const DeviceRegion& src, const Shape& shape, Stream producer) {
  const std::uint64_t n = std::uint64_t(numel(shape)) * sizeof(Bf16);
  if (n > src.bytes)
    throw Error("journal commit of " + key.str() + ": shape " + shape_str(shape) + " needs " + std::to_string(n) +
                    " bytes but " + src.name + " holds " + std::to_string(src.bytes),
                Exit::run_failed);
  const DeviceRegion r = src.sub(0, n, src.name);
  const std::string op = "journal commit " + key.str();
  ++rt_.counters().journal_commits;
  if (kind_ == JournalTransportKind::sync) {
    HostJournal::Entry& e = journal_.prepare(key, shape);
    rt_.copy_d2h(producer, bytes_of(e.data), r, CopyKind::journal, op);
    rt_.host_wait(producer);
    return;
  }
  // A newer commit supersedes chunks of an older one still waiting in the ring.
  for (Slot& s : slots_)
    if (s.pending && s.pending->key == key) s.pending.reset();
  journal_.prepare(key, shape);
  const Stream copy = stream_;
  const Event produced = take_event();
  rt_.record(produced, producer);
  if (rt_.fault() != Fault::commit_skips_producer_wait) rt_.wait(copy, produced);
  for (std::uint64_t o = 0; o < n; o += ring_config_.slot_bytes) {
    const std::uint64_t l = std::min<std::uint64_t>(ring_config_.slot_bytes, n - o);
    Slot& s = acquire_slot();
    rt_.copy_d2h(copy, s.data, r.sub(o, l, r.name), CopyKind::journal, op);
    rt_.record(s.done, copy);
    s.recorded = true;
    s.pending = Pending{key, o, l};
  }
  const Event read_done = take_event();
  rt_.record(read_done, copy);
  in_flight_.push_back(InFlight{r, AccessMode::read, read_done, {copy.id}});
  set_resident(key, r, producer, produced);
}

void JournalTransport::reload(const JournalKey& key, const DeviceRegion& dst, Stream consumer) {
  const HostJournal::Entry& e = journal_.get(key);
  const std::uint64_t n = e.data.size() * sizeof(Bf16);
  if (n > dst.bytes)
    throw Error("journal reload of " + key.str() + ": " + std::to_string(n) + " bytes do not fit " + dst.name + " (" +
                    std::to_string(dst.bytes) + " bytes)",
                Exit::run_failed);
  const DeviceRegion d = dst.sub(0, n, dst.name);
  const std::string op = "journal reload " + key.str();
  if (kind_ == JournalTransportKind::sync) {
    rt_.copy_h2d(consumer, d, bytes_of(e.data), CopyKind::journal, op);
    rt_.host_wait(consumer);
    ++rt_.counters().journal_reloads;
    return;
  }
  if (auto it = resident_.find(key);
      it != resident_.end() && it->second.region.offset == d.offset && it->second.region.bytes == d.bytes) {
    ++rt_.counters().journal_kept_resident;
    if (!(it->second.stream == consumer)) rt_.wait(consumer, it->second.event);
    return;
  }
  const Stream copy = stream_;
  // The destination's previous users are the work already enqueued on the consumer stream.
  const Event dst_free = take_event();
  rt_.record(dst_free, consumer);
  if (rt_.fault() != Fault::reload_skips_consumer_wait) rt_.wait(copy, dst_free);
  give_event(dst_free);
  for (std::uint64_t o = 0; o < n; o += ring_config_.slot_bytes) {
    const std::uint64_t l = std::min<std::uint64_t>(ring_config_.slot_bytes, n - o);
    const DeviceRegion part = d.sub(o, l, d.name);
    // A chunk still in the ring goes straight back from there: the copy stream runs in order.
    auto pending = std::find_if(slots_.begin(), slots_.end(), [&](const Slot& s) {
      return s.pending && s.pending->key == key && s.pending->offset == o;
    });
    if (pending != slots_.end()) {
      rt_.copy_h2d(copy, part, pending->data, CopyKind::journal, op + " (from the ring)");
      rt_.record(pending->done, copy);
      continue;
    }
    Slot& s = acquire_slot();
    rt_.host_access("stage " + op, s.data, l, AccessMode::write);
    std::memcpy(s.data, bytes_of(e.data) + o, l);
    rt_.copy_h2d(copy, part, s.data, CopyKind::journal, op);
    rt_.record(s.done, copy);
    s.recorded = true;
  }
  ++rt_.counters().journal_reloads;
  const Event loaded = take_event();
  rt_.record(loaded, copy);
  in_flight_.push_back(InFlight{d, AccessMode::write, loaded, {copy.id}});
  const Event resident_event = take_event();
  rt_.record(resident_event, copy);
  set_resident(key, d, copy, resident_event);
}

void JournalTransport::flush() {
  if (kind_ == JournalTransportKind::async) {
    rt_.host_wait(stream_);
    for (std::size_t i = 0; i < slots_.size(); ++i) apply(slots_[(next_slot_ + i) % slots_.size()]);
    // Everything enqueued from now on is ordered after the host's wait, hence after these copies.
    for (InFlight& f : in_flight_) give_event(f.event);
    in_flight_.clear();
  }
  rt_.counters().journal_host_bytes = journal_.bytes();
}

void JournalTransport::before_access(Stream stream, std::string_view, const Access& a) {
  if (kind_ != JournalTransportKind::async) return;
  for (InFlight& f : in_flight_) {
    if (!f.region.overlaps(a.region)) continue;
    if (a.mode == AccessMode::read && f.mode == AccessMode::read) continue;
    if (std::find(f.waited.begin(), f.waited.end(), stream.id) == f.waited.end()) {
      rt_.wait(stream, f.event);
      f.waited.push_back(stream.id);
    }
  }
  if (a.mode != AccessMode::write) return;
  // A write that covers an in-flight region (and has waited for it) orders all later users of
  // that region after the copy, so the entry is done; a partial write leaves it in place.
  std::erase_if(in_flight_, [&](const InFlight& f) {
    if (!covers(a.region, f.region)) return false;
    give_event(f.event);
    return true;
  });
  for (auto it = resident_.begin(); it != resident_.end();) {
    auto cur = it++;
    if (cur->second.region.overlaps(a.region)) drop_resident(cur);
  }
}

}  // namespace psi::rt
