#pragma once
// The experiment drivers, one file each; experiments/registry.cpp lists them by name.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "experiments/experiment.h"
#include "experiments/records.h"
#include "experiments/report.h"
#include "report/table.h"

namespace psi::exp {

void run_one_token(const Options& o, Report& r);
std::vector<Table> tabulate_one_token(const nlohmann::json& cases, const nlohmann::json& options);

void run_probes(const Options& o, Report& r);
std::vector<Table> tabulate_probes(const nlohmann::json& cases, const nlohmann::json& options);

void run_projection_oracle(const Options& o, Report& r);
std::vector<Table> tabulate_projection_oracle(const nlohmann::json& cases, const nlohmann::json& options);

void run_block_controls(const Options& o, Report& r);
std::vector<Table> tabulate_block_controls(const nlohmann::json& cases, const nlohmann::json& options);
std::vector<Figure> figures_block_controls(const nlohmann::json& cases);

void run_full_prompt(const Options& o, Report& r);
std::vector<Table> tabulate_full_prompt(const nlohmann::json& cases, const nlohmann::json& options);
std::vector<Figure> figures_full_prompt(const nlohmann::json& cases);

void run_scheduling(const Options& o, Report& r);
// --row-tile: a positive number of rows, or "fit".
void set_row_tile(const std::string& value, Options& o);
std::vector<Table> tabulate_scheduling(const nlohmann::json& cases, const nlohmann::json& options);

void run_capacity(const Options& o, Report& r);
std::vector<Table> tabulate_capacity(const nlohmann::json& cases, const nlohmann::json& options);

void run_memory_scopes(const Options& o, Report& r);
std::vector<Table> tabulate_memory_scopes(const nlohmann::json& cases, const nlohmann::json& options);
std::vector<Figure> figures_memory_scopes(const nlohmann::json& cases);

void run_transport_control(const Options& o, Report& r);
std::vector<Table> tabulate_transport_control(const nlohmann::json& cases, const nlohmann::json& options);

// Experiment::settle of the experiments that compute on recordings (experiments/settle.cpp).
void settle_probes(Options& o);
void settle_projection_oracle(Options& o);
void settle_block_controls(Options& o);
void settle_one_token(Options& o);

void run_fixed_budget(const Options& o, Report& r);
// --pool: a positive amount (rt::parse_capacity).
void set_pool(const std::string& value, Options& o);
std::vector<Table> tabulate_fixed_budget(const nlohmann::json& cases, const nlohmann::json& options);

}  // namespace psi::exp
