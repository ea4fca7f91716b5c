#pragma once
// The PSI execution schedules (the paper's Table IV). Each row adds one change to the one
// before it; all four run the same arithmetic, so their states are bitwise equal:
//
// | name                | FFN hidden tiles                    | journal transport | weight copies           |
// |---------------------|-------------------------------------|-------------------|-------------------------|
// | baseline            | recomputed per down-projection group| sync              | on the compute stream   |
// | ffn-reuse           | computed once, journaled, reloaded  | sync              | on the compute stream   |
// | reuse+async-journal | computed once, journaled, reloaded  | async (pinned ring on its own stream) | on the compute stream |
// | reuse+prefetch      | computed once, journaled, reloaded  | async             | prefetched on the copy stream |
#include <string>
#include <string_view>
#include <vector>

#include "engine/ops/ffn.h"
#include "engine/runtime/journal_transport.h"
#include "engine/runtime/pages.h"

namespace psi::exec {

struct Schedule {
  std::string name;
  ops::FfnSchedule ffn = ops::FfnSchedule::recompute;  // recompute or reuse
  rt::JournalTransportKind journal = rt::JournalTransportKind::sync;
  rt::CopySchedule copies = rt::CopySchedule::on_compute;
};

// The four, in the order above.
const std::vector<Schedule>& schedules();
// By name; an unknown name is a psi::Error listing the valid ones.
const Schedule& schedule(std::string_view name);

}  // namespace psi::exec
