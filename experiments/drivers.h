#pragma once
// The experiment drivers, one file each; experiments/registry.cpp lists them by name.
#include <vector>

#include <nlohmann/json.hpp>

#include "experiments/experiment.h"
#include "experiments/report.h"
#include "experiments/table.h"

namespace psi::exp {

void run_one_token(const Options& o, Report& r);
std::vector<Table> tabulate_one_token(const nlohmann::json& cases, const nlohmann::json& options);

}  // namespace psi::exp
