#include "engine/runtime/run_report.h"

#include "engine/measure/sizes.h"

namespace psi::rt {
namespace {

// Figures that were not measured are null, never 0.
nlohmann::json bytes_if(bool measured, std::uint64_t bytes) { return measured ? nlohmann::json(bytes) : nlohmann::json(); }

}  // namespace

nlohmann::json to_json(const GpuMemoryReport& g) {
  return {
      {"applicable", g.applicable},
      {"available", g.available},
      {"status", g.status},
      {"period_ms", g.period_ms},
      {"samples", g.samples},
      {"failed_samples", g.failed_samples},
      {"last_error", g.last_error},
      {"pid", g.pid},
      {"device_total_bytes", bytes_if(g.available, g.device_total)},
      {"device_used_peak_bytes", bytes_if(g.available, g.device_used_peak)},
      {"process_samples", g.process_samples},
      {"process_no_figure_samples", g.process_no_figure_samples},
      {"process_peak_bytes", bytes_if(g.process_samples > 0, g.process_peak)},
      {"process_status", g.process_status},
  };
}

nlohmann::json to_json(const ReservationReport& v) {
  return {
      {"made", v.made},
      {"status", v.status},
      {"pool_requested_bytes", v.pool_requested},
      {"reserved_bytes", bytes_if(v.made, v.reserved_bytes)},
      {"free_before_bytes", bytes_if(v.made, v.free_before)},
      {"pool_after_bytes", bytes_if(v.made, v.pool_after)},
      {"device_total_bytes", bytes_if(v.made, v.device_total)},
      {"attempts", v.attempts},
  };
}

nlohmann::json to_json(const RunReport& r) {
  const Counters& c = r.counters;
  nlohmann::json h2d = nlohmann::json::object(), d2h = nlohmann::json::object();
  for (int k = 0; k < kCopyKinds; ++k) {
    h2d[std::string(copy_kind_name(CopyKind(k)))] = c.h2d_bytes[std::size_t(k)];
    d2h[std::string(copy_kind_name(CopyKind(k)))] = c.d2h_bytes[std::size_t(k)];
  }
  nlohmann::json j = {
      {"outcome", std::string(outcome_name(r.outcome))},
      {"backend", r.backend},
      {"arena_bytes", r.layout.arena},
      {"page_bytes", r.layout.page},
      {"workspace_bytes", r.layout.workspace},
      {"scratch_bytes", r.layout.scratch},
      {"live_bytes_declared", r.live_bytes},
      {"eps_bytes", r.eps_bytes},
      {"bound_bytes", r.bound},
      {"managed_peak_bytes", r.peak},
      {"scratch_high_water_bytes", r.scratch_high_water},
      {"workspace_high_water_bytes", r.workspace_high_water},
      {"device_allocations", r.device_allocations},
      {"pinned_allocations", r.pinned_allocations},
      {"pinned_bytes", r.pinned_bytes},
      {"h2d_bytes", h2d},
      {"d2h_bytes", d2h},
      {"weight_tiles", c.weight_tiles},
      {"journal_commits", c.journal_commits},
      {"journal_reloads", c.journal_reloads},
      {"journal_kept_resident", c.journal_kept_resident},
      {"blocking_syncs", c.blocking_syncs},
      {"journal_host_bytes", c.journal_host_bytes},
      {"resident_bytes_peak", c.resident_bytes_peak},
      {"gpu_memory", to_json(r.gpu_memory)},
  };
  if (r.reservation) j["reservation"] = to_json(*r.reservation);
  return j;
}

std::string summary(const RunReport& r) {
  const Counters& c = r.counters;
  return "run " + std::string(outcome_name(r.outcome)) + " on " + r.backend + ": managed peak " + format_amount(r.peak) +
         " of bound " + format_amount(r.bound) + " (S_live + W + 2P + eps), " + std::to_string(r.device_allocations) +
         " device allocation(s); H2D weights " + format_amount(c.h2d(CopyKind::weights)) + ", journal " +
         format_amount(c.h2d(CopyKind::journal)) + "; D2H journal " + format_amount(c.d2h(CopyKind::journal)) + "; " +
         std::to_string(c.journal_commits) + " commits, " + std::to_string(c.journal_reloads) + " reloads (" +
         std::to_string(c.journal_kept_resident) + " kept resident); " + std::to_string(c.blocking_syncs) +
         " blocking syncs" + gpu_memory_summary(r.gpu_memory) +
         (r.reservation ? "; fixed budget: " + r.reservation->status : std::string());
}

std::string gpu_memory_summary(const GpuMemoryReport& g) {
  if (!g.applicable) return "";
  if (!g.available) return "; GPU memory (NVML) " + g.status;
  return "; GPU memory (NVML, " + std::to_string(g.samples) + " readings): process peak " +
         (g.process_samples > 0 ? format_amount(g.process_peak) : g.process_status) + ", device used peak " +
         format_amount(g.device_used_peak) + " of " + format_amount(g.device_total);
}

}  // namespace psi::rt
