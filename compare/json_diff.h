#pragma once
// psi compare's JSON field diff: text datasets that declare JSON (a report's cases, tables and
// options; hdf5::is_json_text) compared leaf by leaf, time fields and provenance counted apart.
#include <string>

#include "compare/comparison.h"
#include "hdf5/h5.h"

namespace psi::compare {

// Two text datasets that both declare JSON text (hdf5::is_json_text): compared field by field into
// `out`, numbers by exact value (compare/json_exact.h); text that is not JSON, or names a key twice
// in one object, is a psi::Error naming the file and dataset.
void compare_json_text(const hdf5::File& a, const std::string& path_a, const hdf5::File& b, const std::string& path_b,
                       const CompareOptions& opt, DatasetComparison& out);

}  // namespace psi::compare
