#pragma once
// Table cells for what a run's record says about GPU memory (its "gpu_memory" object: NVML
// sampling, engine/measure/gpu_memory_sampler.h) and about a fixed-budget reservation (its
// "reservation" object, engine/measure/budget.h). A figure that was not measured is shown as
// the reason, never as 0. Records written before these fields existed read as "-".
#include <string>

#include <nlohmann/json.hpp>

namespace psi::exp {

// Whether any of these run records was sampled on a GPU backend (the tables add their GPU
// columns only then; on the CPU backend the records say "not applicable").
bool any_gpu_memory(const nlohmann::json& runs);
// "360.0 MiB", or "not listed" / "no figure" / "unavailable" / "n/a".
std::string gpu_process_peak_cell(const nlohmann::json& run);
// "1.2 GiB of 139.8 GiB" (device used peak of total), or "unavailable" / "n/a".
std::string gpu_device_peak_cell(const nlohmann::json& run);
// One line: "GPU memory (NVML): <status>; process: <process status>".
std::string gpu_memory_note(const nlohmann::json& run);
// "reserved 136.8 GiB, pool left 3.0 GiB", or "not applicable (cpu backend)" / "-".
std::string reservation_cell(const nlohmann::json& run);

}  // namespace psi::exp
