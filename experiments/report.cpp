#include "experiments/report.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <random>
#include <set>

#include "engine/error.h"
#include "hdf5/h5.h"
#include "hdf5/output_path.h"
#include "hdf5/unverified.h"

namespace psi::exp {

namespace {
constexpr const char* kCases = "/report/cases";
constexpr const char* kTables = "/report/tables";
constexpr const char* kOptions = "/report/options";
constexpr const char* kIndex = "index";

std::filesystem::path default_out(const Experiment& e, const Options& o) {
  if (!o.out.empty()) return o.out;
  std::string name = "out/" + e.name;
  if (o.shard_count > 1) name += ".shard" + std::to_string(o.shard_index) + "of" + std::to_string(o.shard_count);
  return name + ".h5";
}

hdf5::RunInfo run_info(const Experiment& e, const Options& o, const std::string& device) {
  hdf5::RunInfo r;
  r.experiment = e.name;
  r.model_config = o.model + "/" + o.profile;
  r.backend = rt::backend_name(o.backend);
  r.device_name = device;
  r.seed = o.seed;
  return r;
}

std::filesystem::path checked(const std::filesystem::path& p, const std::vector<std::filesystem::path>& inputs,
                              const std::string& what) {
  hdf5::check_output(p, inputs, what);
  return p;
}

std::string random_run_id() {
  std::random_device rd;
  char buf[33];
  std::snprintf(buf, sizeof buf, "%08x%08x%08x%08x", unsigned(rd()), unsigned(rd()), unsigned(rd()), unsigned(rd()));
  return buf;
}

constexpr const char* kRunId = "run_id";
constexpr const char* kUnverified = "unverified";

// Tables whose cases rest on data read unchecked (each case's `unverified`): the title says so and
// a note names the cases and the data.
void mark_unverified(std::vector<Table>& tables, const nlohmann::json& cases) {
  std::string which, what;
  for (const auto& c : cases)
    if (c.is_object() && c.contains(kUnverified)) {
      which += (which.empty() ? "" : ", ") + std::to_string(case_index(c));
      if (what.empty() && c[kUnverified].is_string()) what = c[kUnverified].get<std::string>();
    }
  if (which.empty()) return;
  for (Table& t : tables) {
    t.title = "UNVERIFIED: " + t.title;
    t.notes.push_back("UNVERIFIED: case(s) " + which + " rest on data psi could not check (--allow-unverified): " + what);
  }
}
}  // namespace

Report::Report(const Experiment& e, const Options& o, const std::string& device_name,
               std::vector<std::filesystem::path> inputs)
    : experiment_(e), options_(o), inputs_(std::move(inputs)), run_id_(random_run_id()),
      writer_(checked(default_out(e, o), inputs_, "report"), run_info(e, o, device_name)) {
  writer_.set_attrs("/", {{kRunId, run_id_}});
}

void Report::stamp_side_file(hdf5::StateWriter& w) const { w.set_attrs("/", {{kRunId, run_id_}}); }

void Report::check_side_file(const std::filesystem::path& file) const {
  const auto id = h5::File::open_read(file).attr("/", kRunId);
  const std::string* text = id ? std::get_if<std::string>(&*id) : nullptr;
  if (!text || *text != run_id_)
    throw Error(file.string() + " was replaced by another run while this one ran (its run_id is " +
                    (text ? *text : std::string("missing")) + ", this run's " + run_id_ +
                    "); two runs must not share --out",
                Exit::run_failed);
}

std::filesystem::path Report::side_file(const std::string& suffix) const {
  std::filesystem::path p = path();
  p.replace_extension(suffix);
  return checked(p, inputs_, "file beside the report");
}

std::int64_t case_index(const nlohmann::json& record) { return record.at(kIndex).get<std::int64_t>(); }

void Report::add_case(std::int64_t index, nlohmann::json record) {
  record[kIndex] = index;
  // A case computed after data was read unchecked may rest on it: marked, with what that was.
  if (!hdf5::unverified_data().empty()) record[kUnverified] = hdf5::unverified_summary();
  cases_.push_back(std::move(record));
}

std::vector<Table> Report::commit() {
  std::sort(cases_.begin(), cases_.end(),
            [](const nlohmann::json& a, const nlohmann::json& b) { return case_index(a) < case_index(b); });
  std::vector<Table> tables = experiment_.tabulate(cases_, options_.to_json());
  mark_unverified(tables, cases_);
  nlohmann::json tj = nlohmann::json::array();
  for (const Table& t : tables) tj.push_back(t.to_json());
  writer_.write_text(kCases, cases_.dump());
  writer_.write_text(kTables, tj.dump());
  writer_.write_text(kOptions, options_.to_json().dump());
  // The figures' names come from the cases: checked here, before the report is renamed into place.
  const std::vector<Figure> figs = experiment_.figures ? experiment_.figures(cases_) : std::vector<Figure>{};
  for (const Figure& f : figs)
    for (const char* ext : {".svg", ".png"})
      hdf5::check_output(figure_file(path(), f, ext), inputs_, "figure", is_psi_figure);
  writer_.commit();
  if (!figs.empty()) {
    std::vector<std::string> notes;
    figure_files_ = write_figures(path(), figs, notes);
    if (!tables.empty()) tables.back().notes.insert(tables.back().notes.end(), notes.begin(), notes.end());
  }
  return tables;
}

void Report::abandon(const std::filesystem::path& partial) {
  writer_.write_text(kCases, cases_.dump());
  writer_.write_text(kOptions, options_.to_json().dump());
  writer_.abandon_to(partial);
}

std::vector<Table> read_tables(const std::filesystem::path& file) {
  hdf5::StateReader r(file);
  if (!r.file().exists(kTables))
    throw Error(file.string() + ": not a psi experiment report (no " + kTables + ")");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(r.read_text(kTables));
  } catch (const nlohmann::json::exception& e) {
    throw Error(file.string() + ":" + kTables + ": malformed JSON: " + e.what());
  }
  std::vector<Table> out;
  try {
    for (auto& t : j) out.push_back(Table::from_json(t));
  } catch (const Error& e) {
    throw Error(file.string() + ":" + kTables + ": " + e.what());
  }
  return out;
}

std::vector<std::filesystem::path> merge_reports(const std::vector<std::filesystem::path>& shards,
                                                 const std::filesystem::path& out, bool allow_partial) {
  if (shards.empty()) throw Error("psi merge: no shard reports given");
  const Experiment* experiment = nullptr;
  nlohmann::json options, cases = nlohmann::json::array();
  std::set<std::int64_t> seen;
  std::map<std::int64_t, std::filesystem::path> shard_files;  // shard index -> the file given for it
  std::int64_t shard_count = 0;
  std::vector<hdf5::StateReader> readers;
  std::vector<std::filesystem::path> partial;
  for (const auto& path : shards) {
    readers.emplace_back(path);
    const hdf5::StateReader& r = readers.back();
    // A partial shard lacks cases: merged silently, the result would look complete.
    if (const std::string marker = hdf5::partial_marker(r.file()); !marker.empty()) {
      if (!allow_partial)
        throw Error(path.string() + ": a partial report (" + marker +
                    "); psi merge refuses it unless --allow-partial is given (the merged report is then marked partial)");
      partial.push_back(path);
    }
    const hdf5::RunInfo info = r.run_info();
    const Experiment& e = find_experiment(info.experiment);
    if (experiment && experiment != &e)
      throw Error(path.string() + ": experiment '" + e.name + "' differs from '" + experiment->name + "'");
    experiment = &e;
    if (!r.file().exists(kCases) || !r.file().exists(kOptions))
      throw Error(path.string() + ": not a psi experiment report (no " + kCases + ")");
    // The JSON is psi's own, but a shard is a file a user hands over: anything but what psi
    // writes is refused naming the shard, never an escaped JSON exception.
    try {
      nlohmann::json o = nlohmann::json::parse(r.read_text(kOptions));
      if (!o.is_object()) throw Error("not a JSON object");
      const std::int64_t index = o.value("shard_index", std::int64_t(0));
      const std::int64_t count = o.at("shard_count").get<std::int64_t>();
      o.erase("shard_index");
      o.erase("shard_count");
      if (shard_count != 0 && count != shard_count)
        throw Error("written as one of " + std::to_string(count) + " shards, the first shard as one of " +
                    std::to_string(shard_count));
      shard_count = count;
      if (index < 0 || index >= count)
        throw Error("shard index " + std::to_string(index) + " outside 0.." + std::to_string(count - 1));
      if (const auto [it, fresh] = shard_files.emplace(index, path); !fresh)
        throw Error("shard " + std::to_string(index) + "/" + std::to_string(count) + " given twice (also " +
                    it->second.string() + ")");
      if (!options.is_null() && o != options)
        throw Error("options differ from the first shard's: " + o.dump() + " vs " + options.dump());
      options = o;
      const nlohmann::json shard_cases = nlohmann::json::parse(r.read_text(kCases));
      if (!shard_cases.is_array()) throw Error(std::string(kCases) + " is not a JSON list");
      for (const auto& c : shard_cases) {
        const std::int64_t index = case_index(c);
        if (!seen.insert(index).second) throw Error("case " + std::to_string(index) + " appears in more than one shard");
        cases.push_back(c);
      }
    } catch (const nlohmann::json::exception& e) {
      throw Error(path.string() + ": " + kOptions + " or " + kCases + " is not what psi writes: " + e.what());
    } catch (const Error& e) {
      throw Error(path.string() + ": " + e.what(), e.code());
    }
  }
  // A shard whose job failed left no report: named, so that it can be run again alone.
  if (std::int64_t(shard_files.size()) != shard_count) {
    std::string missing;
    for (std::int64_t i = 0; i < shard_count; ++i)
      if (!shard_files.count(i)) missing += (missing.empty() ? "" : ", ") + std::to_string(i) + "/" + std::to_string(shard_count);
    throw Error("shard" + std::string(shard_count - std::int64_t(shard_files.size()) > 1 ? "s " : " ") +
                missing + " missing (" + std::to_string(shard_files.size()) + " of " + std::to_string(shard_count) +
                " given); run " + (shard_count - std::int64_t(shard_files.size()) > 1 ? "them" : "it") +
                " again with psi run ... --shard i/" + std::to_string(shard_count));
  }
  Options merged;  // the shard keys were erased above: from_json gives one whole run, shard 0 of 1
  try {
    merged = Options::from_json(options);
  } catch (const nlohmann::json::exception& e) {
    throw Error(shards.front().string() + ": " + kOptions + " is not what psi writes: " + e.what());
  }
  merged.out = out;
  Report report(*experiment, merged, readers.front().run_info().device_name, shards);
  if (!partial.empty()) {
    std::string names;
    for (const auto& p : partial) names += (names.empty() ? "" : ", ") + p.string();
    report.writer().mark_partial("merged from partial shards (" + names + "): holds only the cases they finished");
  }
  for (const auto& r : readers)
    for (auto& ds : r.datasets())
      if (!ds.path.starts_with("/report/")) report.writer().file().copy_from(r.file(), ds.path);
  for (auto& c : cases) report.add_case(case_index(c), c);
  try {
    report.commit();
  } catch (const nlohmann::json::exception& e) {
    // The experiment's tabulation reads the cases' fields.
    throw Error(shards.front().string() + ": " + kCases + " holds cases psi cannot tabulate: " + e.what());
  }
  return partial;
}

}  // namespace psi::exp
