#include "engine/exec/driver.h"

#include <algorithm>
#include <limits>

#include "engine/error.h"

namespace psi::exec {

namespace {

// Planning stacks start where the runtime's do and never run out.
rt::DeviceRegion unbounded(const rt::DeviceRegion& r) {
  return {r.offset, std::numeric_limits<std::uint64_t>::max() / 4, r.name};
}

bool same_tile(const rt::WeightSlice& a, const rt::WeightSlice& b) {
  return a.tensor == b.tensor && a.slice.r0 == b.slice.r0 && a.slice.r1 == b.slice.r1 && a.slice.c0 == b.slice.c0 &&
         a.slice.c1 == b.slice.c1 && a.op == b.op && a.tile == b.tile;
}

}  // namespace

Driver::Driver(const rt::ArenaLayout& layout) : layout_(layout) {
  plan_scratch_.emplace("scratch", unbounded(layout.scratch_region()), meter_);
  plan_workspace_.emplace("workspace", unbounded(layout.workspace_region()), meter_);
}

Driver::Driver(rt::Runtime& rt, rt::JournalTransport& jt, rt::WeightPager& pager, const BlockPlan& plan,
               ExecCounters& counters)
    : layout_(rt.layout()), rt_(&rt), jt_(&jt), pager_(&pager), plan_(&plan), counters_(&counters) {}

rt::DeviceRegion Driver::alloc(Pool pool, std::uint64_t bytes, std::string_view op, int tile, std::string_view name) {
  // The exhaustion message names "<operator> <tensor> tile <t>".
  const std::string who = std::string(op) + " " + std::string(name);
  if (planning()) {
    rt::StackAllocator& a = pool == Pool::scratch ? *plan_scratch_ : *plan_workspace_;
    const std::uint64_t before = a.high_water();
    rt::DeviceRegion r = a.allocate(bytes, who, tile, name);
    const std::string at = tile < 0 ? who : who + " tile " + std::to_string(tile);
    if (pool == Pool::scratch && a.high_water() > before) recorded_.scratch_peak_at = at;
    if (a.in_use() > (pool == Pool::scratch ? layout_.scratch : layout_.workspace))
      note_failure(pool == Pool::scratch ? rt::Outcome::scratch_exhausted : rt::Outcome::workspace_exhausted, at);
    return r;
  }
  return pool == Pool::scratch ? rt_->scratch_alloc(bytes, who, tile, name) : rt_->workspace_alloc(bytes, who, tile, name);
}

void Driver::free(Pool pool, const rt::DeviceRegion& r) {
  if (planning()) return (pool == Pool::scratch ? *plan_scratch_ : *plan_workspace_).free(r);
  pool == Pool::scratch ? rt_->scratch_free(r) : rt_->workspace_free(r);
}

int Driver::weight(const rt::WeightSlice& w) {
  if (planning()) {
    recorded_.tiles.push_back(w);
    recorded_.weight_bytes += w.bytes();
    last_tile_bytes_ = w.bytes();
    if (w.bytes() > layout_.page) note_failure(rt::Outcome::tile_exceeds_page, w.describe());
    return 0;
  }
  if (next_tile_ >= plan_->tiles.size() || !same_tile(plan_->tiles[next_tile_], w))
    throw Error("PSI executor: weight tile " + w.describe() + " is not the plan's next tile" +
                    (next_tile_ < plan_->tiles.size() ? " (" + plan_->tiles[next_tile_].describe() + ")" : std::string()),
                Exit::run_failed);
  ++next_tile_;
  // Tiles filled so far across the run, before this request: more than the tiles already
  // consumed means this one was copied ahead.
  const std::uint64_t filled_before = rt_->counters().weight_tiles;
  const int p = pager_->next(rt_->compute());
  if (filled_before > counters_->tiles_consumed) ++counters_->tiles_copied_ahead;
  ++counters_->tiles_consumed;
  return p;
}

rt::DeviceRegion Driver::page(int p) const {
  // Planning: the tile's bytes at the page's start, even for a tile larger than the page (the
  // run, not the plan, reports that).
  if (planning()) return {layout_.page_region(p).offset, last_tile_bytes_, "page " + std::to_string(p)};
  return rt_->pages().region(p);
}

void Driver::release(int p) {
  if (!planning()) pager_->done(p, rt_->compute());
}

void Driver::launch(std::string_view op, const rt::Accesses& accesses, rt::Kernel kernel) {
  if (!planning()) rt_->launch(rt_->compute(), op, accesses, std::move(kernel));
}

void Driver::reload(const rt::JournalKey& key, const rt::DeviceRegion& dst) {
  if (!planning()) jt_->reload(key, dst, rt_->compute());
}

void Driver::commit(const rt::JournalKey& key, const rt::DeviceRegion& src, const Shape& shape) {
  if (planning()) {
    recorded_.largest_commit = std::max(recorded_.largest_commit, std::uint64_t(numel(shape)) * sizeof(Bf16));
    return;
  }
  jt_->commit(key, src, shape, rt_->compute());
}

void Driver::note_failure(rt::Outcome o, const std::string& what) {
  if (recorded_.outcome != rt::Outcome::complete) return;
  recorded_.outcome = o;
  recorded_.failure = what;
}

BlockPlan Driver::plan() const {
  BlockPlan p = recorded_;
  if (planning()) {
    p.scratch_bytes = plan_scratch_->high_water();
    p.workspace_bytes = plan_workspace_->high_water();
  }
  return p;
}

Frame::~Frame() {
  // Reverse order keeps both stacks LIFO; nothing here can fail once the allocations were made
  // in order, and a destructor must not throw while an error unwinds.
  for (auto it = held_.rbegin(); it != held_.rend(); ++it) {
    try {
      d_.free(it->first, it->second);
    } catch (...) {
    }
  }
}

rt::DeviceRegion Frame::alloc(Pool pool, std::uint64_t bytes, std::string_view op, int tile, std::string_view name) {
  rt::DeviceRegion r = d_.alloc(pool, bytes, op, tile, name);
  held_.emplace_back(pool, r);
  return r;
}

}  // namespace psi::exec
