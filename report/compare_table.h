#pragma once
// psi compare's result as a user reads it: a table, JSON, or the CSV of its differing elements
// (compare/compare.h computes it).
#include <string>

#include "compare/compare.h"

namespace psi::report {

// A table, one line per dataset, then a summary line.
std::string compare_table(const compare::CompareReport& r);
// The same as JSON.
std::string compare_json(const compare::CompareReport& r);

// Every differing element the comparison collected, one CSV row each (`psi compare --list`).
inline constexpr const char* kDifferencesCsvHeader = "dataset_a,dataset_b,flat_index,index,a,b,ulp,sign_flip";
std::string differences_csv(const compare::CompareReport& r);

}  // namespace psi::report
