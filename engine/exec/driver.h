#pragma once
// The one code path that both plans and runs a block. Operators are written once against a
// Driver:
//  * PLANNING mode runs nothing. It records the weight tiles in consumption order, lays out the
//    scratch and workspace stacks exactly as the runtime will (same base offsets, same 256-byte
//    rounding, no capacity limit) and keeps their high-water marks, and notes the largest tensor
//    committed to the journal. The scratch high water is the block's S_live.
//  * EXECUTION mode forwards to the runtime: allocations to its stacks, weight tiles to the
//    pager (and checks each against the plan), kernels to the compute stream, state to the
//    journal transport.
// So the declared S_live is the live set of the very allocation sequence that runs.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/runtime/arena.h"
#include "engine/runtime/journal_transport.h"
#include "engine/runtime/pages.h"
#include "engine/runtime/run_failure.h"
#include "engine/runtime/runtime.h"

namespace psi::exec {

enum class Pool { scratch, workspace };

struct BlockPlan {
  std::vector<rt::WeightSlice> tiles;  // in consumption order
  std::uint64_t scratch_bytes = 0;     // S_live: the scratch stack's high water
  std::string scratch_peak_at;         // the allocation that reached it ("video.attn1 v")
  std::uint64_t workspace_bytes = 0;   // the workspace stack's high water
  std::uint64_t largest_commit = 0;    // bytes of the largest tensor committed to the journal
  std::uint64_t weight_bytes = 0;      // sum of the tiles' bytes
  // What a run of this plan in the planning arena meets first, in program order: complete, or
  // the first allocation beyond the scratch or workspace capacity or the first tile larger
  // than a page (`failure` names it: "video.attn1 q tile 3").
  rt::Outcome outcome = rt::Outcome::complete;
  std::string failure;
};

// What the executor counts on top of the runtime's counters.
struct ExecCounters {
  std::uint64_t tiles_consumed = 0;
  // Tiles whose copy into a page was issued before their consumer asked for them (prefetch).
  std::uint64_t tiles_copied_ahead = 0;
};

class Driver {
 public:
  // Planning mode, with the arena's layout.
  explicit Driver(const rt::ArenaLayout& layout);
  // Execution mode: `plan` is this block's plan, its tiles already pushed to `pager`.
  Driver(rt::Runtime& rt, rt::JournalTransport& jt, rt::WeightPager& pager, const BlockPlan& plan,
         ExecCounters& counters);
  Driver(const Driver&) = delete;
  Driver& operator=(const Driver&) = delete;

  bool planning() const { return rt_ == nullptr; }
  std::uint64_t page_bytes() const { return layout_.page; }

  // Stack allocations (LIFO; Frame does the bookkeeping). A scratch or workspace allocation
  // that does not fit fails the run with the runtime's scratch_exhausted/workspace_exhausted.
  rt::DeviceRegion alloc(Pool pool, std::uint64_t bytes, std::string_view op, int tile, std::string_view name);
  void free(Pool pool, const rt::DeviceRegion& r);

  // The page holding the next weight tile, ready on the compute stream (w must be the plan's
  // next tile in execution mode).
  int weight(const rt::WeightSlice& w);
  rt::DeviceRegion page(int p) const;
  void release(int p);

  void launch(std::string_view op, const rt::Accesses& accesses, rt::Kernel kernel);
  void reload(const rt::JournalKey& key, const rt::DeviceRegion& dst);
  void commit(const rt::JournalKey& key, const rt::DeviceRegion& src, const Shape& shape);

  // Planning mode: the plan recorded so far.
  BlockPlan plan() const;

 private:
  rt::ArenaLayout layout_;
  // Planning.
  rt::PeakMeter meter_;
  std::optional<rt::StackAllocator> plan_scratch_, plan_workspace_;
  BlockPlan recorded_;
  std::uint64_t last_tile_bytes_ = 0;
  void note_failure(rt::Outcome o, const std::string& what);
  // Execution.
  rt::Runtime* rt_ = nullptr;
  rt::JournalTransport* jt_ = nullptr;
  rt::WeightPager* pager_ = nullptr;
  const BlockPlan* plan_ = nullptr;
  ExecCounters* counters_ = nullptr;
  std::size_t next_tile_ = 0;
};

// Allocations that end together: freed in reverse order when the frame closes (or unwinds).
class Frame {
 public:
  explicit Frame(Driver& d) : d_(d) {}
  ~Frame();
  Frame(const Frame&) = delete;
  Frame& operator=(const Frame&) = delete;

  rt::DeviceRegion alloc(Pool pool, std::uint64_t bytes, std::string_view op, int tile, std::string_view name);

 private:
  Driver& d_;
  std::vector<std::pair<Pool, rt::DeviceRegion>> held_;
};

}  // namespace psi::exec
