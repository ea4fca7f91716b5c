#pragma once
// psi compare's JSON field diff: text datasets that hold JSON (a report's cases, tables and
// options) compared leaf by leaf, time fields and provenance counted apart.
#include <string>

#include "compare/compare.h"
#include "hdf5/h5.h"

namespace psi::compare {

// Two uint8 datasets that both hold JSON: compared field by field into `out`; false when either
// is not JSON (then they are compared as bytes).
bool compare_json_text(const hdf5::File& a, const std::string& path_a, const hdf5::File& b, const std::string& path_b,
                       const CompareOptions& opt, DatasetComparison& out);

}  // namespace psi::compare
