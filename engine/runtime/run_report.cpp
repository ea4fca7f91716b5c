#include "engine/runtime/run_report.h"

#include "engine/runtime/sizes.h"

namespace psi::rt {

nlohmann::json to_json(const RunReport& r) {
  const Counters& c = r.counters;
  nlohmann::json h2d = nlohmann::json::object(), d2h = nlohmann::json::object();
  for (int k = 0; k < kCopyKinds; ++k) {
    h2d[std::string(copy_kind_name(CopyKind(k)))] = c.h2d_bytes[std::size_t(k)];
    d2h[std::string(copy_kind_name(CopyKind(k)))] = c.d2h_bytes[std::size_t(k)];
  }
  return {
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
  };
}

std::string summary(const RunReport& r) {
  const Counters& c = r.counters;
  return "run " + std::string(outcome_name(r.outcome)) + " on " + r.backend + ": managed peak " + format_amount(r.peak) +
         " of bound " + format_amount(r.bound) + " (S_live + W + 2P + eps), " + std::to_string(r.device_allocations) +
         " device allocation(s); H2D weights " + format_amount(c.h2d(CopyKind::weights)) + ", journal " +
         format_amount(c.h2d(CopyKind::journal)) + "; D2H journal " + format_amount(c.d2h(CopyKind::journal)) + "; " +
         std::to_string(c.journal_commits) + " commits, " + std::to_string(c.journal_reloads) + " reloads (" +
         std::to_string(c.journal_kept_resident) + " kept resident); " + std::to_string(c.blocking_syncs) +
         " blocking syncs";
}

}  // namespace psi::rt
