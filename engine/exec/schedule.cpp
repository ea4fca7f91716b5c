#include "engine/exec/schedule.h"

#include "engine/error.h"

namespace psi::exec {

const std::vector<Schedule>& schedules() {
  using F = ops::FfnSchedule;
  using J = rt::JournalTransportKind;
  using C = rt::CopySchedule;
  static const std::vector<Schedule> all = {
      {"baseline", F::recompute, J::sync, C::on_compute},
      {"ffn-reuse", F::reuse, J::sync, C::on_compute},
      {"reuse+async-journal", F::reuse, J::async, C::on_compute},
      {"reuse+prefetch", F::reuse, J::async, C::prefetch},
  };
  return all;
}

const Schedule& schedule(std::string_view name) {
  std::string known;
  for (const Schedule& s : schedules()) {
    if (s.name == name) return s;
    known += (known.empty() ? "" : ", ") + s.name;
  }
  throw Error("unknown PSI schedule '" + std::string(name) + "' (known: " + known + ")");
}

}  // namespace psi::exec
