#include "experiments/report.h"

#include <algorithm>
#include <map>

#include "engine/error.h"

namespace psi::exp {

namespace {
constexpr const char* kCases = "/report/cases";
constexpr const char* kTables = "/report/tables";
constexpr const char* kOptions = "/report/options";

std::filesystem::path default_out(const Experiment& e, const Options& o) {
  if (!o.out.empty()) return o.out;
  std::string name = "out/" + e.name;
  if (o.shard_count > 1) name += ".shard" + std::to_string(o.shard_index) + "of" + std::to_string(o.shard_count);
  return name + ".h5";
}

reports::RunInfo run_info(const Experiment& e, const Options& o, const std::string& device) {
  reports::RunInfo r;
  r.experiment = e.name;
  r.model_config = o.model + "/" + o.profile;
  r.backend = o.backend;
  r.device_name = device;
  r.seed = o.seed;
  return r;
}
}  // namespace

Report::Report(const Experiment& e, const Options& o, const std::string& device_name)
    : experiment_(e), options_(o), writer_(default_out(e, o), run_info(e, o, device_name)) {}

void Report::add_case(std::int64_t index, nlohmann::json record) {
  record["index"] = index;
  cases_.push_back(std::move(record));
}

std::vector<Table> Report::commit() {
  std::sort(cases_.begin(), cases_.end(),
            [](const nlohmann::json& a, const nlohmann::json& b) { return a["index"] < b["index"]; });
  std::vector<Table> tables = experiment_.tabulate(cases_, options_.to_json());
  nlohmann::json tj = nlohmann::json::array();
  for (const Table& t : tables) tj.push_back(t.to_json());
  writer_.write_text(kCases, cases_.dump());
  writer_.write_text(kTables, tj.dump());
  writer_.write_text(kOptions, options_.to_json().dump());
  writer_.commit();
  if (experiment_.figures) {
    std::vector<std::string> notes;
    figure_files_ = write_figures(path(), experiment_.figures(cases_), notes);
    if (!tables.empty()) tables.back().notes.insert(tables.back().notes.end(), notes.begin(), notes.end());
  }
  return tables;
}

std::vector<Table> read_tables(const std::filesystem::path& file) {
  reports::StateReader r(file);
  if (!r.file().exists(kTables))
    throw Error(file.string() + ": not a psi experiment report (no " + kTables + ")");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(r.read_text(kTables));
  } catch (const nlohmann::json::exception& e) {
    throw Error(file.string() + ":" + kTables + ": malformed JSON: " + e.what());
  }
  std::vector<Table> out;
  for (auto& t : j) out.push_back(Table::from_json(t));
  return out;
}

}  // namespace psi::exp
