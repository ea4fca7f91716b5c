#pragma once
// A run's report as JSON (for result files) and as one summary line (for the terminal).
#include <nlohmann/json.hpp>
#include <string>

#include "engine/runtime/runtime.h"

namespace psi::rt {

nlohmann::json to_json(const RunReport& r);
std::string summary(const RunReport& r);

}  // namespace psi::rt
