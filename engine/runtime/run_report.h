#pragma once
// A run's report as JSON (for result files) and as one summary line (for the terminal).
#include <nlohmann/json.hpp>
#include <string>

#include "engine/runtime/runtime.h"

namespace psi::rt {

nlohmann::json to_json(const RunReport& r);
nlohmann::json to_json(const GpuMemoryReport& g);
nlohmann::json to_json(const ReservationReport& v);
// The run in one line. The GPU memory part appears only where sampling applies (CUDA backend).
std::string summary(const RunReport& r);
// "; GPU memory (NVML, n readings): process peak ..., device used peak ... of ...", or "" when
// sampling does not apply.
std::string gpu_memory_summary(const GpuMemoryReport& g);

}  // namespace psi::rt
