#pragma once
// The device check's summary (scripts/device-check.sh, `psi device summary DIR`): one Markdown
// page, and its JSON, from what a check folder holds — the run's context and step results, the
// measured ceilings, the experiment reports, the CUDA test programs' results. Every number is
// read from those files or computed from them (the transfer floor); what is missing is printed
// as unavailable with the reason, never filled in. A device-check tool beside `psi device`, not
// an experiment: it reads the experiments' reports and shares their tables.
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hdf5/state_file.h"

namespace psi::device_check {

struct CopyRate {
  double mib = 0, h2d_gbps = 0, d2h_gbps = 0;
};
struct GemmRate {
  std::int64_t m = 0, n = 0, k = 0;
  double ms = 0, tflops = 0;
};
struct Ceilings {
  std::vector<CopyRate> copies;
  std::vector<GemmRate> gemms;
};

// `psi device ceilings --json` lines (the recordings' h200-ceilings.jsonl reads too; kinds
// other than copy and gemm are skipped). A malformed line is a psi::Error naming source:line.
Ceilings parse_ceilings(const std::string& text, const std::string& source);

// The measured copy whose size is nearest `page_bytes` (on a log scale: the weight pages are
// copied in page-sized tiles); nullptr when there is none.
const CopyRate* copy_for_page(const Ceilings& c, double page_bytes);

struct Report {
  hdf5::RunInfo info;
  nlohmann::json options, cases;
};

struct Step {
  std::string name;
  int exit_code = 0;
  double seconds = 0;
  std::string note;
};

struct TestProgram {
  std::string name;
  int tests = 0, failed = 0, skipped = 0, disabled = 0;
  std::vector<std::string> failures;  // Suite.Test of each failed test
};

// Everything a check folder holds.
struct CheckFolder {
  std::filesystem::path dir;
  std::vector<std::pair<std::string, std::string>> context;  // context.tsv, in order
  std::vector<Step> steps;                                   // steps.tsv
  std::optional<Ceilings> ceilings;                          // ceilings.jsonl
  std::map<std::string, Report> reports;                     // <experiment>.h5
  std::map<std::string, std::string> unreadable;             // file -> why it could not be read
  std::vector<TestProgram> tests;                            // tests/<program>.json (GoogleTest JSON)
  std::optional<nlohmann::json> torch_linear;                // torch-linear.json (scripts/device-torch-linear.py)
  std::string context_value(const std::string& key) const;   // "" when absent
};

// Reads DIR: context.tsv, steps.tsv, ceilings.jsonl, scheduling.h5, scheduling-fit.h5, capacity.h5,
// block-controls.h5, probes.h5, tests/*.json, torch-linear.json; any of them may be missing. Each
// report's section is its experiment's (Experiment::device_summary).
CheckFolder read_check_folder(const std::filesystem::path& dir);
// The files read_check_folder reads in `dir` (some may not exist), which the summary's outputs
// must not be (outputs/output_path.h).
std::vector<std::filesystem::path> check_folder_inputs(const std::filesystem::path& dir);

// GoogleTest's --gtest_output=json for one program.
TestProgram parse_gtest_json(const std::string& name, const std::string& text);

std::string render_markdown(const CheckFolder& f);
// The start of the summary's first line (its title): how a later --out knows the file for psi's.
inline constexpr const char* kSummaryTitle = "# psi device check — ";
nlohmann::json to_json(const CheckFolder& f);

}  // namespace psi::device_check
