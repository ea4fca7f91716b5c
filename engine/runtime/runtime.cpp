#include "engine/runtime/runtime.h"

#include <algorithm>

#include "engine/backend/backend_factory.h"
#include "engine/measure/gpu_memory_monitor.h"
#include "engine/runtime/pages.h"
#include "engine/measure/sizes.h"
#include "engine/runtime/validator.h"

namespace psi::rt {
namespace {

ArenaLayout checked_layout(const RuntimeConfig& c) {
  ArenaLayout l = ArenaLayout::make(c.arena_bytes, c.page_bytes, c.workspace_bytes);
  if (c.live_bytes <= 0) throw Error("live_bytes (S_live) must be declared and positive (got " + std::to_string(c.live_bytes) + ")");
  if (std::uint64_t(c.live_bytes) > l.scratch)
    throw Error("live_bytes " + std::to_string(c.live_bytes) + " exceeds the scratch capacity " + std::to_string(l.scratch) +
                " left by arena_bytes " + std::to_string(l.arena));
  if (c.eps_bytes < 0) throw Error("eps_bytes must not be negative (got " + std::to_string(c.eps_bytes) + ")");
  return l;
}

}  // namespace

Runtime::Runtime(const RuntimeConfig& config)
    : config_(config),
      layout_(checked_layout(config)),
      scratch_("scratch", layout_.scratch_region(), meter_),
      workspace_("workspace", layout_.workspace_region(), meter_) {
  CpuBackendOptions cpu;
  cpu.chaos_seed = config.chaos_seed;
  cpu.chaos_max_us = config.chaos_max_us;
  BackendChoice choice = make_backend(config.backend, cpu);
  backend_ = std::move(choice.backend);
  backend_note_ = std::move(choice.note);
  if (config.validate) validator_ = std::make_unique<Validator>(backend_->runs_hooks());
  // Sampling starts before the arena exists, so the process peak covers the whole run.
  GpuMemoryMonitorOptions sampling;
  sampling.period = config.gpu_sample_period;
  gpu_memory_ = std::make_unique<GpuMemoryMonitor>(backend_->name(), sampling);
  hold_under_cap(layout_.arena, "the arena");
  arena_ = backend_->allocate_arena(layout_.arena);
  meter_.add(2 * layout_.page);  // the two pages are in use for the whole run
  compute_ = create_stream("compute");
  copy_ = create_stream("copy");
  pages_ = std::make_unique<WeightPages>(*this);
}

Runtime::~Runtime() { drain(); }

void Runtime::drain() noexcept {
  for (StreamHandle h : stream_handles_) {
    try {
      backend_->synchronize_stream(h);
    } catch (...) {
      // A backend error here repeats one the run reports elsewhere; draining the rest matters more.
    }
  }
}

Stream Runtime::create_stream(std::string_view name) {
  const StreamHandle h = backend_->create_stream(name);
  stream_handles_.push_back(h);
  stream_names_.emplace_back(name);
  if (validator_) validator_->add_lane(std::string(name));
  return Stream{int(stream_handles_.size() - 1)};
}

Event Runtime::create_event() {
  event_handles_.push_back(backend_->create_event());
  event_lanes_.push_back(validator_ ? validator_->add_event() : -1);
  return Event{int(event_handles_.size() - 1)};
}

void Runtime::record(Event e, Stream s) {
  backend_->record(event_handles_.at(std::size_t(e.id)), stream_handles_.at(std::size_t(s.id)));
  if (validator_) validator_->record(event_lanes_[std::size_t(e.id)], lane(s));
}

void Runtime::wait(Stream s, Event e) {
  backend_->wait(stream_handles_.at(std::size_t(s.id)), event_handles_.at(std::size_t(e.id)));
  if (validator_) validator_->wait(lane(s), event_lanes_[std::size_t(e.id)]);
}

bool Runtime::query(Event e) {
  backend_->rethrow_async_error();
  return backend_->query(event_handles_.at(std::size_t(e.id)));
}

void Runtime::host_wait(Event e) {
  backend_->synchronize_event(event_handles_.at(std::size_t(e.id)));
  ++counters_.blocking_syncs;
  backend_->rethrow_async_error();
  if (validator_) validator_->host_wait_event(event_lanes_[std::size_t(e.id)]);
}

void Runtime::host_wait(Stream s) {
  backend_->synchronize_stream(stream_handles_.at(std::size_t(s.id)));
  ++counters_.blocking_syncs;
  backend_->rethrow_async_error();
  if (validator_) validator_->host_wait_lane(lane(s));
}

void Runtime::synchronize() {
  for (std::size_t i = 0; i < stream_handles_.size(); ++i) {
    backend_->synchronize_stream(stream_handles_[i]);
    if (validator_) validator_->host_wait_lane(lane(Stream{int(i)}));
  }
  ++counters_.blocking_syncs;
  backend_->rethrow_async_error();
}

Hooks Runtime::admit(Stream s, std::string_view op, const Accesses& accesses, const std::vector<TrackedAccess>& host) {
  backend_->rethrow_async_error();
  try {
    for (const Access& a : accesses) {
      if (a.region.end() > layout_.arena || a.region.end() < a.region.offset)
        throw ScheduleViolation(std::string(op) + ": region " + a.region.name + " lies outside the arena");
      for (AccessListener* l : listeners_) l->before_access(s, op, a);
    }
    if (!validator_) return {};
    std::vector<TrackedAccess> tracked = host;
    for (const Access& a : accesses)
      tracked.push_back({Space::device, a.region.offset, a.region.bytes, a.mode, a.region.name});
    return validator_->enqueue(lane(s), op, tracked);
  } catch (const ScheduleViolation&) {
    drain();  // nothing already enqueued may outlive the caller's unwinding
    throw;
  }
}

void Runtime::copy_h2d(Stream s, const DeviceRegion& dst, const std::byte* src, CopyKind kind, std::string_view op) {
  Hooks hooks = admit(s, op, {writes(dst)},
                      {{Space::host, std::uint64_t(reinterpret_cast<std::uintptr_t>(src)), dst.bytes, AccessMode::read,
                        "host buffer of " + dst.name}});
  backend_->copy_h2d(stream_handles_.at(std::size_t(s.id)), dst.offset, src, dst.bytes, std::move(hooks));
  counters_.h2d_bytes[std::size_t(kind)] += dst.bytes;
}

void Runtime::copy_d2h(Stream s, std::byte* dst, const DeviceRegion& src, CopyKind kind, std::string_view op) {
  Hooks hooks = admit(s, op, {reads(src)},
                      {{Space::host, std::uint64_t(reinterpret_cast<std::uintptr_t>(dst)), src.bytes, AccessMode::write,
                        "host buffer of " + src.name}});
  backend_->copy_d2h(stream_handles_.at(std::size_t(s.id)), dst, src.offset, src.bytes, std::move(hooks));
  counters_.d2h_bytes[std::size_t(kind)] += src.bytes;
}

void Runtime::launch(Stream s, std::string_view op, const Accesses& accesses, Kernel kernel) {
  Hooks hooks = admit(s, op, accesses, {});
  backend_->launch(stream_handles_.at(std::size_t(s.id)), std::move(kernel), std::move(hooks));
}

void Runtime::host_access(std::string_view op, const std::byte* p, std::size_t bytes, AccessMode mode) {
  if (!validator_) return;
  try {
    validator_->enqueue(Validator::kHost, op,
                        {{Space::host, std::uint64_t(reinterpret_cast<std::uintptr_t>(p)), bytes, mode, std::string(op)}});
  } catch (const ScheduleViolation&) {
    drain();
    throw;
  }
}

void Runtime::hold_under_cap(std::uint64_t bytes, std::string_view what) {
  if (!config_.memory_cap) return;
  const std::uint64_t held = (arena_ ? layout_.arena : 0) + pinned_bytes_;
  if (held + bytes > *config_.memory_cap)
    fail(Outcome::cap_exceeded, std::string(what) + " (" + std::to_string(bytes) + " bytes) would take the run's " +
                                    "memory to " + std::to_string(held + bytes) + " bytes, over the fixed budget's cap of " +
                                    std::to_string(*config_.memory_cap) + " bytes");
}

HostBuffer Runtime::allocate_pinned(std::size_t bytes, std::string_view what) {
  hold_under_cap(bytes, what);
  try {
    HostBuffer b = backend_->allocate_pinned(bytes);
    pinned_bytes_ += bytes;
    return b;
  } catch (const Error& e) {
    throw Error(std::string(what) + ": " + e.what(), e.code());
  }
}

DeviceRegion Runtime::scratch_alloc(std::uint64_t bytes, std::string_view op, int tile, std::string_view name) {
  try {
    return scratch_.allocate(bytes, op, tile, name);
  } catch (const RunFailure&) {
    drain();
    throw;
  }
}

DeviceRegion Runtime::workspace_alloc(std::uint64_t bytes, std::string_view op, int tile, std::string_view name) {
  try {
    return workspace_.allocate(bytes, op, tile, name);
  } catch (const RunFailure&) {
    drain();
    throw;
  }
}

void Runtime::add_listener(AccessListener* l) { listeners_.push_back(l); }

void Runtime::remove_listener(AccessListener* l) { std::erase(listeners_, l); }

void Runtime::fail(Outcome outcome, const std::string& msg) {
  drain();
  throw RunFailure(outcome, msg);
}

RunReport Runtime::report() const {
  RunReport r;
  r.backend = std::string(backend_->name());
  r.layout = layout_;
  r.live_bytes = std::uint64_t(config_.live_bytes);
  r.eps_bytes = std::uint64_t(config_.eps_bytes);
  r.bound = r.live_bytes + layout_.workspace + 2 * layout_.page + r.eps_bytes;
  r.peak = meter_.peak;
  r.scratch_high_water = scratch_.high_water();
  r.workspace_high_water = workspace_.high_water();
  r.device_allocations = backend_->device_allocations();
  r.pinned_allocations = backend_->pinned_allocations();
  r.pinned_bytes = pinned_bytes_;
  r.counters = counters_;
  r.gpu_memory = gpu_memory_->report();
  return r;
}

RunReport Runtime::finish() {
  synchronize();
  gpu_memory_->stop();  // the last reading is the state at the end of the run
  RunReport r = report();
  if (r.device_allocations != 1)
    throw Error("runtime: the run made " + std::to_string(r.device_allocations) +
                    " device allocations; the arena contract allows exactly 1",
                Exit::run_failed);
  if (r.peak > r.bound)
    fail(Outcome::bound_exceeded,
         "managed peak " + std::to_string(r.peak) + " bytes (" + format_amount(r.peak) + ") exceeds the declared bound " +
             std::to_string(r.bound) + " bytes = S_live " + std::to_string(r.live_bytes) + " + W " +
             std::to_string(layout_.workspace) + " + 2P " + std::to_string(2 * layout_.page) + " + eps " +
             std::to_string(r.eps_bytes));
  return r;
}

}  // namespace psi::rt
