#include "probes/recorded_paths.h"

namespace psi::probes {

std::vector<RecordedPaths> recorded_paths(const ProbeReport& r) {
  std::vector<RecordedPaths> out;
  if (r.outputs.empty()) return out;
  Recording math(r.file, r.group);
  std::optional<Recording> flash;
  if (!r.flash_file.empty()) flash.emplace(r.flash_file, r.group);
  for (const auto& [name, t] : r.outputs.front().second) {
    if (!math.has("math/" + name)) continue;
    RecordedPaths p{name, math.stored_bf16("math/" + name), std::nullopt, std::nullopt};
    Recording& fr = flash && flash->has("flash/" + name) ? *flash : math;
    if (fr.has("flash/" + name)) {
      StoredTensor f = fr.stored_bf16("flash/" + name);
      const StoredTensor& m = p.math;
      if (f.full_shape == m.full_shape && f.full == m.full && f.first_row == m.first_row && f.row_count == m.row_count) {
        p.flash_vs_math = distance(f.data.span(), m.data.span());
        p.flash = std::move(f);
      }
    }
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace psi::probes
