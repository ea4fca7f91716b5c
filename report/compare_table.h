#pragma once
// psi compare's result as a user reads it: a table, or JSON (compare/compare.h computes it).
#include <string>

#include "compare/compare.h"

namespace psi::report {

// A table, one line per dataset, then a summary line.
std::string compare_table(const compare::CompareReport& r);
// The same as JSON.
std::string compare_json(const compare::CompareReport& r);

}  // namespace psi::report
