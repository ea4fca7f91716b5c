#include "experiments/process_peak.h"

#include "experiments/gpu_memory_cells.h"
#include "report/table.h"

namespace psi::exp {

ProcessPeak process_peak(rt::BackendKind backend, const nlohmann::json& run, const rt::ResidentPeak& resident) {
  if (backend == rt::BackendKind::cpu)
    return {resident.since_start() ? kHostPeakSinceStart : kHostPeak, resident.bytes(), ""};
  if (run.is_null()) return {kGpuPeak, std::nullopt, "none: the path runs on whole host tensors"};
  const nlohmann::json& peak = run.at("gpu_memory").at("process_peak_bytes");
  if (!peak.is_null()) return {kGpuPeak, peak.get<std::uint64_t>(), ""};
  return {kGpuPeak, std::nullopt, gpu_process_peak_cell(run)};
}

ProcessPeakColumn process_peak_column(const std::vector<const ProcessPeak*>& peaks) {
  bool one_kind = !peaks.empty();
  for (const ProcessPeak* p : peaks) one_kind = one_kind && p && p->kind == peaks.front()->kind;
  if (one_kind) return {"process peak (" + peaks.front()->kind + ")", false};
  return {"process peak", true};
}

std::string ProcessPeakColumn::cell(const ProcessPeak* p) const {
  if (!p) return "not recorded";
  const std::string figure = p->bytes ? report::fmt_mib(double(*p->bytes)) : p->why;
  return kind_in_cells ? figure + " (" + p->kind + ")" : figure;
}

}  // namespace psi::exp
