#pragma once
// What the experiments' sections of the device check's summary (Experiment::device_summary,
// rendered by device_check/summary.cpp) write with: Markdown tables and the numbers of a run
// report (engine/runtime/run_report.cpp), printed as unavailable where the report lacks them.
#include <string>

#include <nlohmann/json.hpp>

#include "report/table.h"

namespace psi::exp {

// A table without the "### title" line that render() writes even for an empty title.
std::string md_table(const report::Table& t);

// The number `key` of `j`; NaN when it has none.
double num(const nlohmann::json& j, const char* key);

// Seconds as milliseconds.
std::string ms(double seconds, int decimals = 2);

// Bytes as MiB, or "-" when the report lacks the number (NaN).
std::string amount(double bytes);

// Two byte counts of a run report: "a / b".
std::string bytes_pair(const nlohmann::json& run, const char* a, const char* b);

}  // namespace psi::exp
