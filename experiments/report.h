#pragma once
// The one HDF5 report of an experiment run (psi-h5/1): root run attributes, the options, one
// JSON record per case under /report/cases, the rendered tables under /report/tables, and
// whatever states and tensors the driver saves. Written under a temporary name and renamed at
// commit(); an exception or an interrupt before that leaves nothing under the final name.
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "experiments/experiment.h"
#include "hdf5/state_file.h"

namespace psi::exp {

class Report {
 public:
  // `inputs`: the files the command reads (run_inputs, or the shards of a merge). The report is
  // checked against them by the output rule (outputs/output_path.h) here, before any work.
  Report(const Experiment& e, const Options& o, const std::string& device_name,
         std::vector<std::filesystem::path> inputs);

  hdf5::StateWriter& writer() { return writer_; }
  const Options& options() const { return options_; }
  // One case's results (the record of the experiment's file); `index` orders cases
  // across shards and is added to the record (case_index).
  void add_case(std::int64_t index, nlohmann::json record);
  const nlohmann::json& cases() const { return cases_; }
  // Marks a claim the run makes as broken (e.g. states that must be bitwise equal differ): the
  // report is still written, then `psi run` exits 1 with these messages, each followed by its
  // `where` lines (the first differing elements, probes::difference_lines).
  struct Failure {
    std::string message;
    std::vector<std::string> where;
  };
  void fail(const std::string& message, std::vector<std::string> where = {}) {
    failures_.push_back(Failure{message, std::move(where)});
  }
  const std::vector<Failure>& failures() const { return failures_; }

  // Tabulates, stores the tables and cases, commits, then draws the experiment's figures beside
  // the report; returns the tables for printing.
  std::vector<Table> commit();
  // Figure files written by commit(), and notes about any that could not be.
  const std::vector<std::filesystem::path>& figure_files() const { return figure_files_; }
  // An interrupted run: what was written so far goes to `partial` (partial_path()).
  void abandon(const std::filesystem::path& partial);
  const std::filesystem::path& path() const { return writer_.path(); }
  // A file beside the report, <report stem><suffix> (e.g. ".ffn-reuse.h5"), checked by the
  // output rule against the inputs: a driver that writes files of its own names them here first.
  std::filesystem::path side_file(const std::string& suffix) const;
  // A random 128-bit id of this run, the report's root attribute `run_id`: a driver stamps its
  // side files with it (stamp_side_file) and checks that a side file it reads back is still its
  // own (check_side_file), since a concurrent run with the same --out writes the same names.
  const std::string& run_id() const { return run_id_; }
  void stamp_side_file(hdf5::StateWriter& w) const;
  void check_side_file(const std::filesystem::path& file) const;
  // <report>.partial.h5, where an interrupted run's cases go.
  std::filesystem::path partial_path() const { return side_file(".partial.h5"); }
  std::filesystem::path temp_path() const { return writer_.temp_path(); }

 private:
  // /report/cases, with its attribute time_fields (the experiment's keys that measure time).
  void write_cases();

  const Experiment& experiment_;
  Options options_;
  std::vector<std::filesystem::path> inputs_;
  std::string run_id_;
  hdf5::StateWriter writer_;
  nlohmann::json cases_ = nlohmann::json::array();
  std::vector<std::filesystem::path> figure_files_;
  std::vector<Failure> failures_;
};

// The index Report::add_case gave a recorded case (a nlohmann::json::exception if it has none).
std::int64_t case_index(const nlohmann::json& record);

// Reads the tables of a report written by Report::commit (psi::Error naming the file if it is
// not one).
std::vector<Table> read_tables(const std::filesystem::path& file);

// Joins shard reports of one experiment into the report a single run would have written:
// same options but the shard, every case once, every saved dataset copied bit for bit. A partial
// shard (an interrupted run's <report>.partial.h5) is refused unless `allow_partial`; then the
// merged report is marked partial too. Returns the partial shards merged.
std::vector<std::filesystem::path> merge_reports(const std::vector<std::filesystem::path>& shards,
                                                 const std::filesystem::path& out, bool allow_partial);

}  // namespace psi::exp
