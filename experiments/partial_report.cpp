#include "experiments/partial_report.h"

#include <algorithm>

#include "engine/error.h"
#include "engine/json_read.h"
#include "experiments/experiment.h"
#include "experiments/report.h"
#include "hdf5/state_file.h"

namespace psi::exp {

namespace {

// Where Report writes them (experiments/report.cpp).
constexpr const char* kCases = "/report/cases";
constexpr const char* kOptions = "/report/options";

nlohmann::json read_report_json(const hdf5::StateReader& r, const char* dataset) {
  const std::string where = r.path().string() + ":" + dataset;
  std::string why;
  auto parsed = read_json_if_valid(r.read_text(dataset), where, &why);
  if (!parsed) throw Error(where + ": malformed JSON: " + why);
  return std::move(*parsed);
}

}  // namespace

std::optional<PartialTables> read_partial_tables(const std::filesystem::path& file) {
  const hdf5::StateReader r(file);
  PartialTables out;
  out.marker = hdf5::partial_marker(r.file());
  if (out.marker.empty()) return std::nullopt;
  if (!r.file().exists(kCases) || !r.file().exists(kOptions))
    throw Error(file.string() + ": a partial file but not a psi experiment report (no " + kCases + ")");
  const Experiment& e = find_experiment(r.run_info().experiment);
  nlohmann::json cases = read_report_json(r, kCases);
  const nlohmann::json options = read_report_json(r, kOptions);
  if (!cases.is_array()) throw Error(file.string() + ":" + kCases + " is not a JSON list");
  out.cases = cases.size();
  if (cases.empty())
    throw Error(file.string() + ": a partial report (" + out.marker + ") in which no case finished: nothing to tabulate");
  try {
    std::sort(cases.begin(), cases.end(),
              [](const nlohmann::json& a, const nlohmann::json& b) { return case_index(a) < case_index(b); });
    out.tables = e.tabulate(cases, options);
  } catch (const nlohmann::json::exception& ex) {
    throw Error(file.string() + ":" + kCases + " holds cases psi cannot tabulate: " + ex.what());
  }
  const std::string mark = " [PARTIAL: " + std::to_string(out.cases) + (out.cases == 1 ? " case" : " cases") +
                           " finished before the run was interrupted]";
  for (Table& t : out.tables) {
    t.title += mark;
    t.notes.push_back("partial report (" + out.marker + "): the cases the interrupted run had not finished are missing");
  }
  return out;
}

}  // namespace psi::exp
