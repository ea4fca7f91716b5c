#include "experiments/gpu_memory_cells.h"

#include "engine/measure/sizes.h"
#include "report/table.h"

namespace psi::exp {
namespace {

const nlohmann::json* field(const nlohmann::json& run, const char* name) {
  if (!run.is_object()) return nullptr;
  auto it = run.find(name);
  return it == run.end() || !it->is_object() ? nullptr : &*it;
}

std::string amount(const nlohmann::json& bytes) { return rt::format_amount(bytes.get<std::uint64_t>()); }

}  // namespace

bool any_gpu_memory(const nlohmann::json& runs) {
  for (const auto& r : runs)
    if (const auto* g = field(r, "gpu_memory"); g && g->value("applicable", false)) return true;
  return false;
}

std::string gpu_process_peak_cell(const nlohmann::json& run) {
  const auto* g = field(run, "gpu_memory");
  if (!g) return "-";
  if (!g->value("applicable", false)) return "n/a";
  if (!g->value("available", false)) return "unavailable";
  const auto& peak = (*g)["process_peak_bytes"];
  if (!peak.is_null()) return amount(peak);
  return g->value("process_no_figure_samples", 0) > 0 ? "no figure" : "not listed";
}

std::string gpu_device_peak_cell(const nlohmann::json& run) {
  const auto* g = field(run, "gpu_memory");
  if (!g) return "-";
  if (!g->value("applicable", false)) return "n/a";
  if (!g->value("available", false)) return "unavailable";
  return amount((*g)["device_used_peak_bytes"]) + " of " + amount((*g)["device_total_bytes"]);
}

std::string gpu_memory_note(const nlohmann::json& run) {
  const auto* g = field(run, "gpu_memory");
  if (!g) return "GPU memory: not recorded (a report written before NVML sampling existed)";
  return "GPU memory (NVML): " + g->value("status", std::string("?")) + "; process: " +
         g->value("process_status", std::string("?"));
}

std::string reservation_cell(const nlohmann::json& run) {
  const auto* v = field(run, "reservation");
  if (!v) return "-";
  if (!v->value("made", false)) return "not applicable (" + run.value("backend", std::string("?")) + " backend)";
  return "reserved " + amount((*v)["reserved_bytes"]) + ", pool left " + amount((*v)["pool_after_bytes"]);
}

}  // namespace psi::exp
