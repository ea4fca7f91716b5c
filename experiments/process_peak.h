#pragma once
// A path's process peak, the paper's "process peak" column (Tables II and III): on the CUDA
// backend the GPU memory NVML lists for the psi process over the path's run (PSI paths; a path on
// whole host tensors has none), on the CPU backend the process's peak resident set (VmHWM) over
// the path, named as such, since no device memory exists there. Never a number of another kind:
// where there is none, the record says why.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/backend/backend_factory.h"
#include "engine/measure/resident_peak.h"
#include "experiments/record_fields.h"

namespace psi::exp {

struct ProcessPeak {
  std::string kind;  // what the bytes are: kGpuPeak or kHostPeak / kHostPeakSinceStart
  std::optional<std::uint64_t> bytes;
  std::string why;  // when bytes is null
  static auto fields() {
    using R = ProcessPeak;
    // Measured on the machine, it differs from run to run as a wall time does: psi compare counts it
    // with the times, apart.
    return std::tuple{field("process_peak_kind", &R::kind),
                      field_nullable("process_peak_bytes", &R::bytes).measures_time(),
                      field_when_set("process_peak_why", &R::why)};
  }
};

inline constexpr const char* kGpuPeak = "GPU, NVML";
inline constexpr const char* kHostPeak = "host resident, VmHWM, CPU backend";
inline constexpr const char* kHostPeakSinceStart = "host resident since the process started, VmHWM, CPU backend";

// The peak of a path that ran on `backend`: `run` is its executor's run report (null for a path on
// whole host tensors), `resident` was started as the path began.
ProcessPeak process_peak(rt::BackendKind backend, const nlohmann::json& run, const rt::ResidentPeak& resident);

// A table's process peak column over these peaks (null: a report before the peak was recorded):
// "process peak (<kind>)" when every peak is of one kind, else "process peak" with the kind in
// each cell. A table lists it among its time_columns, since it differs from run to run.
struct ProcessPeakColumn {
  std::string name;
  bool kind_in_cells = false;
  std::string cell(const ProcessPeak* p) const;  // "12.3 MiB", the reason there is none, "not recorded"
};
ProcessPeakColumn process_peak_column(const std::vector<const ProcessPeak*>& peaks);

}  // namespace psi::exp
