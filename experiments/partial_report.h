#pragma once
// psi report on an interrupted run's <report>.partial.h5 (Report::abandon): the file holds the
// cases finished before the signal and the options, not the tables, so they are tabulated here
// by the run's experiment over the stored cases, as psi merge re-tabulates shards; each table's
// title says it is partial.
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "report/table.h"

namespace psi::exp {

struct PartialTables {
  std::string marker;        // the file's `partial` root attribute
  std::size_t cases = 0;     // the cases it holds
  std::vector<Table> tables;
};

// nullopt when `file` is not partial (psi::Error when it is neither a psi file nor a report).
std::optional<PartialTables> read_partial_tables(const std::filesystem::path& file);

}  // namespace psi::exp
