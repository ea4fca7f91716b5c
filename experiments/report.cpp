#include "experiments/report.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <map>
#include <random>
#include <set>

#include "engine/error.h"
#include "engine/json_read.h"
#include "hdf5/h5.h"
#include "hdf5/schema.h"
#include "hdf5/unverified.h"
#include "outputs/output_path.h"

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
  outputs::check_output(p, inputs, what, hdf5::is_psi_h5);
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
  const auto id = hdf5::File::open_read(file).attr("/", kRunId);
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
  write_cases();
  // A table's provenance lines name where its inputs lay (report/table.h).
  writer_.write_json(kTables, tj.dump(),
                     {{hdf5::attr::provenance_fields, nlohmann::json::array({Table::kProvenanceKey}).dump()}});
  writer_.write_json(kOptions, options_.to_json().dump());
  // The figures' names come from the cases: checked here, before the report is renamed into place.
  const std::vector<Figure> figs = experiment_.figures ? experiment_.figures(cases_) : std::vector<Figure>{};
  for (const Figure& f : figs)
    for (const char* ext : {".svg", ".png"})
      outputs::check_output(figure_file(path(), f, ext), inputs_, "figure", is_psi_figure);
  writer_.commit();
  if (!figs.empty()) {
    std::vector<std::string> notes;
    figure_files_ = write_figures(path(), figs, notes);
    if (!tables.empty()) tables.back().notes.insert(tables.back().notes.end(), notes.begin(), notes.end());
  }
  return tables;
}

void Report::write_cases() {
  writer_.write_json(kCases, cases_.dump());
  // What the cases' record says of its keys (Experiment::time_fields, provenance_fields), as JSON
  // lists: psi compare counts them apart (compare/compare.h).
  const auto keys = [](const std::function<std::vector<std::string>()>& of) {
    return nlohmann::json(of ? of() : std::vector<std::string>{}).dump();
  };
  writer_.set_attrs(kCases, {{hdf5::attr::time_fields, keys(experiment_.time_fields)},
                             {hdf5::attr::provenance_fields, keys(experiment_.provenance_fields)}});
}

void Report::abandon(const std::filesystem::path& partial) {
  write_cases();
  writer_.write_json(kOptions, options_.to_json().dump());
  writer_.abandon_to(partial);
}

std::vector<Table> read_tables(const std::filesystem::path& file) {
  hdf5::StateReader r(file);
  if (!r.file().exists(kTables))
    throw Error(file.string() + ": not a psi experiment report (no " + kTables + ")");
  std::string why;
  auto parsed = read_json_if_valid(r.read_text(kTables), file.string() + ":" + kTables, &why);
  if (!parsed) throw Error(file.string() + ":" + kTables + ": malformed JSON: " + why);
  const nlohmann::json j = std::move(*parsed);
  // Iterating an object would take its values as the tables: psi writes a list.
  if (!j.is_array())
    throw Error(file.string() + ":" + kTables + ": a JSON " + std::string(j.type_name()) + ", not the list of tables psi writes");
  std::vector<Table> out;
  try {
    for (auto& t : j) out.push_back(Table::from_json(t));
  } catch (const Error& e) {
    throw Error(file.string() + ":" + kTables + ": " + e.what());
  }
  return out;
}

namespace {

// A value of a shard quoted in a message: at most 120 characters of it.
std::string quoted(const std::string& v) { return "'" + (v.size() > 120 ? v.substr(0, 120) + "..." : v) + "'"; }

// The provenance that makes shards parts of one run: refused, naming the field and both values,
// where a shard's differs from the first shard's.
void check_same_run(const std::filesystem::path& first, const hdf5::RunInfo& a, const hdf5::RunInfo& b) {
  const std::pair<const char*, std::pair<std::string, std::string>> fields[] = {
      {"psi_version", {a.psi_version, b.psi_version}},
      {"psi_git_revision", {a.psi_git_revision, b.psi_git_revision}},
      {"experiment", {a.experiment, b.experiment}},
      {"model_config", {a.model_config, b.model_config}},
      {"backend", {a.backend, b.backend}},
      {"seed", {std::to_string(a.seed), std::to_string(b.seed)}},
  };
  for (const auto& [name, v] : fields)
    if (v.first != v.second)
      throw Error(std::string(name) + " " + quoted(v.second) + " differs from " + quoted(v.first) + " of the first shard " +
                  first.string() + "; shards of one run share it");
}

// The first option (a key of /report/options) whose value differs, named with both values.
void check_same_options(const std::filesystem::path& first, const nlohmann::json& a, const nlohmann::json& b) {
  for (const auto* side : {&a, &b})
    for (const auto& [key, value] : side->items()) {
      const bool in_a = a.contains(key), in_b = b.contains(key);
      if (in_a && in_b && a[key] == b[key]) continue;
      throw Error("option " + key + " " + (in_b ? quoted(b[key].dump()) : std::string("(absent)")) + " differs from " +
                  (in_a ? quoted(a[key].dump()) : std::string("(absent)")) + " of the first shard " + first.string() +
                  "; shards of one run share their options");
    }
}

// At most this many missing shards are named; the rest are counted.
constexpr std::int64_t kMissingNamed = 10;

// "3/8, 5/8 and 2 more": the first shards `given` lacks, found by walking the gaps between the
// indexes given (never the whole count, which a shard may claim to be 2^31 - 1).
std::string missing_shards(const std::map<std::int64_t, std::filesystem::path>& given, std::int64_t count) {
  std::string named;
  std::int64_t listed = 0, next = 0;
  auto gap = [&](std::int64_t end) {
    for (std::int64_t i = next; i < end && listed < kMissingNamed; ++i, ++listed)
      named += (named.empty() ? "" : ", ") + std::to_string(i) + "/" + std::to_string(count);
  };
  for (const auto& entry : given) {
    gap(entry.first);
    next = entry.first + 1;
  }
  gap(count);
  const std::int64_t missing = count - std::int64_t(given.size());
  if (missing > listed) named += " and " + std::to_string(missing - listed) + " more";
  return named;
}

// Every dataset a shard contributes is checked against its sha256_full before it is copied: a
// shard changed after it was written must not pass into a merged report as psi's.
void check_before_copy(const hdf5::StateReader& r, const hdf5::DatasetInfo& di) {
  const std::string where = r.path().string() + ":" + di.path;
  std::vector<std::uint8_t> bytes;
  const auto take = [&](const auto& t) {
    const auto* p = reinterpret_cast<const std::uint8_t*>(t.ptr());
    bytes.assign(p, p + t.bytes());
  };
  switch (di.kind) {
    case hdf5::ElemKind::bf16: take(r.read_bf16(di.path)); break;
    case hdf5::ElemKind::f32: take(r.read_f32(di.path)); break;
    case hdf5::ElemKind::f64: take(r.read_f64(di.path)); break;
    case hdf5::ElemKind::u8: bytes = r.file().read_u8(di.path); break;
    default:
      throw Error(where + ": " + std::string(hdf5::kind_name(di.kind)) +
                  " data, which psi does not write in a report; psi merge copies only what it can check");
  }
  switch (hdf5::check_sha256_full(r.file(), di.path, bytes.data(), bytes.size())) {
    case hdf5::Sha256Check::match: return;
    case hdf5::Sha256Check::mismatch: throw Error(hdf5::sha256_mismatch_message(r.file(), di.path) + "; not merged");
    case hdf5::Sha256Check::not_recorded:
      hdf5::unverifiable(where, hdf5::unverifiable_reason(hdf5::read_integrity(r.file(), di.path)));
      return;
    case hdf5::Sha256Check::not_whole:
      hdf5::unverifiable(where, "stores part of the tensor (stored='" + hdf5::read_integrity(r.file(), di.path).stored +
                                    "'): its sha256_full, over the whole tensor, cannot check what would be copied");
      return;
  }
}

}  // namespace

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
    // A shard whose cases rest on data it read unchecked passes that on to the merged report.
    if (const std::string marker = hdf5::unverified_marker(r.file()); !marker.empty())
      hdf5::unverifiable(path.string(), "a report resting on data read unchecked (" + marker + ")");
    const hdf5::RunInfo info = r.run_info();
    if (readers.size() > 1) {
      try {
        check_same_run(shards.front(), readers.front().run_info(), info);
      } catch (const Error& e) {
        throw Error(path.string() + ": " + e.what());
      }
    }
    experiment = &find_experiment(info.experiment);
    if (!r.file().exists(kCases) || !r.file().exists(kOptions))
      throw Error(path.string() + ": not a psi experiment report (no " + kCases + ")");
    // The JSON is psi's own, but a shard is a file a user hands over: anything but what psi
    // writes is refused naming the shard, never an escaped JSON exception.
    try {
      nlohmann::json o = read_json(r.read_text(kOptions), path.string() + ":" + kOptions);
      if (!o.is_object()) throw Error("not a JSON object");
      // Any integer here, so that the range checks below name what is wrong with it.
      constexpr std::int64_t lo = std::numeric_limits<std::int64_t>::min(), hi = std::numeric_limits<std::int64_t>::max();
      const std::int64_t index = o.contains("shard_index") ? integer_option(o, "shard_index", lo, hi) : 0;
      const std::int64_t count = integer_option(o, "shard_count", lo, hi);
      o.erase("shard_index");
      o.erase("shard_count");
      // psi run takes --shard i/n with n < 2^31 (Options::shard_count is an int).
      if (count < 1 || count > std::numeric_limits<int>::max())
        throw Error("shard_count " + std::to_string(count) + " is not what psi writes (1 to " +
                    std::to_string(std::numeric_limits<int>::max()) + ")");
      if (shard_count != 0 && count != shard_count)
        throw Error("written as one of " + std::to_string(count) + " shards, the first shard as one of " +
                    std::to_string(shard_count));
      shard_count = count;
      if (index < 0 || index >= count)
        throw Error("shard index " + std::to_string(index) + " outside 0.." + std::to_string(count - 1));
      if (const auto [it, fresh] = shard_files.emplace(index, path); !fresh)
        throw Error("shard " + std::to_string(index) + "/" + std::to_string(count) + " given twice (also " +
                    it->second.string() + ")");
      if (!options.is_null()) check_same_options(shards.front(), options, o);
      options = o;
      const nlohmann::json shard_cases = read_json(r.read_text(kCases), path.string() + ":" + kCases);
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
    const std::string missing = missing_shards(shard_files, shard_count);
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
  } catch (const Error& e) {
    throw Error(shards.front().string() + ":" + kOptions + ": " + e.what(), e.code());
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
      if (!ds.path.starts_with("/report/")) {
        check_before_copy(r, ds);
        report.writer().file().copy_from(r.file(), ds.path);
      }
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
