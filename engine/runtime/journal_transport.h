#pragma once
// Moving state between the arena and the host journal.
//
// commit(key, src, producer): the state in `src`, produced by work already enqueued on
// `producer`, is saved under key (a D2H copy after the producer's work; the host store is
// updated once the copy has completed).
// reload(key, dst, consumer): the journal's value of key is placed in `dst` for work enqueued
// next on `consumer` (an H2D copy that starts only after the work already enqueued on
// `consumer`, i.e. after dst's previous users on that stream).
//
// Two transports give the same bytes:
//  * sync: copies on the producer/consumer stream, the host blocking until each is done;
//  * async: D2H/H2D through a pinned host ring on a stream of its own ("journal", so that state
//    copies and weight fills on the "copy" stream do not queue behind each other), ordered by
//    events, so copies overlap compute; the host store is updated when a ring slot is recycled or at flush(). A
//    committed state stays resident: reloading it into the region it was committed from
//    costs no copy while nothing has written that region since. Later writers of a region an
//    in-flight copy reads or writes are made to wait for it (through the runtime's access
//    listener), so residency and overlap never race.
#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "engine/runtime/journal.h"
#include "engine/runtime/runtime.h"

namespace psi::rt {

enum class JournalTransportKind { sync, async };

struct AsyncRingConfig {
  std::size_t slots = 4;
  std::uint64_t slot_bytes = 1 << 20;  // a multiple of 2; larger tensors move in chunks
};

class JournalTransport : public AccessListener {
 public:
  JournalTransport(Runtime& rt, HostJournal& journal, JournalTransportKind kind, AsyncRingConfig ring = {});
  ~JournalTransport() override;
  JournalTransport(const JournalTransport&) = delete;
  JournalTransport& operator=(const JournalTransport&) = delete;

  JournalTransportKind kind() const { return kind_; }

  // `src`/`dst` hold the tensor's numel(shape) BF16 values at their start.
  void commit(const JournalKey& key, const DeviceRegion& src, const Shape& shape, Stream producer);
  void reload(const JournalKey& key, const DeviceRegion& dst, Stream consumer);
  // Every commit made so far is in the host store (blocking). Call before reading the store.
  void flush();

  void before_access(Stream stream, std::string_view op, const Access& access) override;

 private:
  struct Pending {  // a commit chunk sitting in a ring slot, not yet in the host store
    JournalKey key;
    std::uint64_t offset, bytes;
  };
  struct Slot {
    std::byte* data = nullptr;
    Event done;             // recorded after the slot's last copy
    bool recorded = false;
    std::optional<Pending> pending;
  };
  struct InFlight {         // a copy-stream access of a region that later users must wait for
    DeviceRegion region;
    AccessMode mode;        // read: a commit's D2H; write: a reload's H2D
    Event event;
    std::vector<int> waited;  // streams already made to wait
  };
  struct Resident {
    DeviceRegion region;
    Stream stream;          // where the value was last written
    Event event;            // recorded after that write
  };

  Event take_event();
  void give_event(Event e);
  Slot& acquire_slot();
  void apply(Slot& s);
  void set_resident(const JournalKey& key, const DeviceRegion& r, Stream s, Event e);
  void drop_resident(std::map<JournalKey, Resident>::iterator it);

  Runtime& rt_;
  HostJournal& journal_;
  JournalTransportKind kind_;
  AsyncRingConfig ring_config_;
  HostBuffer ring_;
  Stream stream_;
  std::vector<Slot> slots_;
  std::size_t next_slot_ = 0;
  std::vector<InFlight> in_flight_;
  std::map<JournalKey, Resident> resident_;
  std::uint64_t resident_bytes_ = 0;
  std::vector<Event> spare_events_;
};

}  // namespace psi::rt
