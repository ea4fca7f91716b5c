#pragma once
// The two reusable weight pages and their lifecycle:
//
//   free --fill (H2D in flight)--> filling --ready (consumer waits on the copy event)--> ready
//   ready --first declared read--> consuming --release (consumer event recorded)--> free
//
// At most one outstanding slice request per page. A page's next fill waits (on the fill
// stream) on its last consumer's event; consumption waits on the copy's event. Breaking the
// lifecycle (reading a page not waited on, filling a page that is not free, writing a page by
// anything but its fill, releasing a page still filling) is a ScheduleViolation naming the page
// and the operator.
//
// Each page has its own pinned staging buffer: a fill first waits (host) for the page's
// previous copy out of it, then has the weight source write the tile into it. A tile the
// source holds host-resident (WeightSource::resident, resident_weights.h) is copied straight
// from there instead.
#include <array>
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

#include "engine/checkpoint/weight_source.h"
#include "engine/runtime/runtime.h"

namespace psi::rt {

enum class PageState { free, filling, ready, consuming };
std::string_view page_state_name(PageState s);

struct WeightSlice {
  std::string tensor;
  ckpt::Slice slice;
  std::string op;  // the operator that will consume it
  int tile = -1;

  std::uint64_t bytes() const { return std::uint64_t(slice.numel()) * 2; }
  std::string describe() const;  // "ffn.up tile 2 (x.weight rows [0, 16) cols [0, 64))"
};

class WeightPages : public AccessListener {
 public:
  explicit WeightPages(Runtime& rt);
  ~WeightPages() override;

  // The page whose turn it is (pages alternate); a ScheduleViolation if it is not free.
  int acquire(std::string_view op);
  int turn() const { return turn_; }
  // free -> filling: the tile goes source -> staging (host) -> page (H2D on `s`), or resident
  // host memory -> page. A tile larger
  // than the page fails the run (RunFailure tile_exceeds_page).
  void fill(int page, Stream s, const ckpt::WeightSource& source, const WeightSlice& w);
  // filling|ready -> ready on `consumer`: the consumer stream waits on the copy event.
  void ready(int page, Stream consumer);
  // ready|consuming -> free: records the consumer event on `consumer`, which must be the only
  // stream that read the page.
  void release(int page, Stream consumer);

  PageState state(int page) const { return pages_.at(std::size_t(page)).state; }
  const WeightSlice& slice(int page) const { return pages_.at(std::size_t(page)).slice; }
  // The tile's bytes inside the page (named "page i").
  DeviceRegion region(int page) const;

  void before_access(Stream stream, std::string_view op, const Access& access) override;

 private:
  struct Page {
    DeviceRegion whole;
    HostBuffer staging;
    Event copy_done;
    Event consumed;
    bool copied_before = false;    // copy_done has been recorded
    bool consumed_before = false;  // consumed has been recorded
    PageState state = PageState::free;
    WeightSlice slice;
    std::vector<int> ready_on;     // streams that waited on copy_done
    std::vector<int> readers;      // streams that read the page
  };
  [[noreturn]] void violation(int page, const std::string& what);

  Runtime& rt_;
  std::array<Page, 2> pages_;
  int turn_ = 0;
  int filling_self_ = -1;  // the page whose fill copy is being enqueued now
};

// The two copy schedules for a sequence of weight tiles.
enum class CopySchedule {
  on_compute,  // each tile is copied on the consumer's stream just before it is consumed
  prefetch,    // while a tile is consumed, the next one is copied into the other page on the copy stream
};

class WeightPager {
 public:
  WeightPager(Runtime& rt, const ckpt::WeightSource& source, CopySchedule schedule);

  // Appends a tile to the plan (tiles are consumed in push order; a plan may span operators).
  void push(WeightSlice w);
  // The page holding the oldest pushed tile, ready on `consumer`; under prefetch, also starts
  // the copy of the following tile into the other page once that page is free.
  int next(Stream consumer);
  // Releases the page: records its consumer event on `consumer`.
  void done(int page, Stream consumer);

 private:
  void prefetch_front();

  Runtime& rt_;
  const ckpt::WeightSource& source_;
  CopySchedule schedule_;
  std::deque<WeightSlice> plan_;
  int in_flight_ = -1;  // the page holding plan_.front() under prefetch, or -1
};

}  // namespace psi::rt
