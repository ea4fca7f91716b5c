#include "device_check/summary.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <optional>
#include <sstream>

#include "engine/error.h"
#include "engine/input_file.h"
#include "engine/json_read.h"
#include "engine/real_number.h"
#include "engine/whole_number.h"
#include "experiments/device_summary.h"
#include "experiments/experiment.h"
#include "report/table.h"

namespace psi::device_check {

// The report layer's tables and formats, and the experiments' sections' Markdown table, so the
// summary reads like the reports.
using exp::md_table;
using report::Table;
using report::fmt_count;
using report::fmt_fixed;
using report::fmt_mib;

namespace {

// The summary prints what it reads, so it reads only the check folder's own regular files: a
// symbolic link there could lead to any file on the machine, a fifo or device would block the
// read or never end. Whether the folder holds `p`, refusing it if it is anything but a regular file.
bool folder_holds(const std::filesystem::path& p) {
  std::error_code ec;
  const auto type = std::filesystem::symlink_status(p, ec).type();
  if (type == std::filesystem::file_type::not_found) return false;
  if (type == std::filesystem::file_type::symlink)
    throw Error(p.string() + ": a symbolic link in the check folder; psi device summary reads only the folder's own "
                "regular files");
  if (ec || type != std::filesystem::file_type::regular) throw Error(p.string() + ": not a regular file");
  return true;
}

// Opened without following a link and checked on the descriptor, so that what is read is what
// folder_holds saw even if the name is replaced meanwhile.
std::string read_file(const std::filesystem::path& p) {
  const int fd = ::open(p.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    throw Error(p.string() + (err == ELOOP ? ": a symbolic link in the check folder; psi device summary reads only "
                                             "the folder's own regular files"
                                           : ": cannot be read (" + std::string(std::strerror(err)) + ")"));
  }
  struct stat st {};
  std::string text;
  const bool regular = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  char buf[65536];
  ssize_t n = 0;
  while (regular && (n = ::read(fd, buf, sizeof buf)) > 0) text.append(buf, std::size_t(n));
  ::close(fd);
  if (!regular) throw Error(p.string() + ": not a regular file");
  if (n < 0) throw Error(p.string() + ": cannot be read");
  return text;
}

std::vector<std::string> split(const std::string& line, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char ch : line) {
    if (ch == sep) {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += ch;
    }
  }
  out.push_back(cur);
  return out;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) {
    if (!l.empty() && l.back() == '\r') l.pop_back();
    if (!l.empty()) out.push_back(l);
  }
  return out;
}

// The experiment reports a check folder may hold, in the order the summary shows them: the file's
// stem, the experiment that wrote it (whose Experiment::device_summary renders its section) and
// the section's title.
struct Section {
  std::string report, experiment, title;
};
const std::vector<Section>& sections() {
  static const std::vector<Section> all{
      {"scheduling", "scheduling", "First block, four schedules (`psi run scheduling`)"},
      {"scheduling-fit", "scheduling",
       "The same at the largest row tile that fits the arena (`psi run scheduling --row-tile fit`)"},
      {"capacity", "capacity", "Arena and page settings (`psi run capacity`)"},
      {"block-controls", "block-controls", "Relative L2 to the recorded official MATH block (`psi run block-controls`)"},
      {"probes", "probes", "Operator probes (`psi run probes`)"}};
  return all;
}

std::string step_result(const Step& s) {
  if (s.exit_code == 0) return "ok";
  if (s.exit_code == 124 || s.exit_code == 137) return "timed out (exit " + std::to_string(s.exit_code) + ")";
  return "failed (exit " + std::to_string(s.exit_code) + ")";
}

// Why a report is missing: the step of the same name, when the folder has one.
std::string missing_report(const CheckFolder& f, const std::string& name) {
  const std::string file = name + ".h5";
  if (auto it = f.unreadable.find(file); it != f.unreadable.end()) return "unavailable: " + it->second;
  for (const Step& s : f.steps)
    if (s.name == name)
      return "unavailable: no " + file + " (step " + name + " " + step_result(s) +
             (s.note.empty() ? "" : ": " + s.note) + ")";
  return "unavailable: no " + file + " (step " + name + " not run)";
}

void render_context(const CheckFolder& f, std::ostringstream& o) {
  if (f.context.empty()) {
    o << "unavailable: no context.tsv\n\n";
    return;
  }
  Table t;
  t.columns = {"", ""};
  for (const auto& [k, v] : f.context) t.add_row({k, v});
  o << md_table(t) << "\n";
}

void render_steps(const CheckFolder& f, std::ostringstream& o) {
  o << "## Steps\n\n";
  if (f.steps.empty()) {
    o << "unavailable: no steps.tsv\n\n";
    return;
  }
  Table t;
  t.columns = {"step", "result", "seconds", "note"};
  for (const Step& s : f.steps) t.add_row({s.name, step_result(s), fmt_fixed(s.seconds, 1), s.note});
  o << md_table(t) << "\n";
}

void render_ceilings(const CheckFolder& f, std::ostringstream& o) {
  o << "## Ceilings (`psi device ceilings`)\n\n";
  if (!f.ceilings || (f.ceilings->copies.empty() && f.ceilings->gemms.empty())) {
    std::string why = "no ceilings.jsonl";
    for (const Step& s : f.steps)
      if (s.name == "ceilings") why += " (step ceilings " + step_result(s) + (s.note.empty() ? "" : ": " + s.note) + ")";
    o << "unavailable: " << why << "\n\n";
    return;
  }
  Table c;
  c.columns = {"pinned copy", "H2D GB/s", "D2H GB/s"};
  for (const auto& x : f.ceilings->copies)
    c.add_row({fmt_mib(x.mib * 1048576.0), fmt_fixed(x.h2d_gbps, 2), fmt_fixed(x.d2h_gbps, 2)});
  Table g;
  g.columns = {"cuBLAS BF16 GEMM m × n × k", "ms", "TFLOP/s"};
  for (const auto& x : f.ceilings->gemms)
    g.add_row({std::to_string(x.m) + " × " + std::to_string(x.n) + " × " + std::to_string(x.k), fmt_fixed(x.ms, 3),
               fmt_fixed(x.tflops, 1)});
  if (!c.rows.empty()) o << md_table(c) << "\n";
  if (!g.rows.empty()) o << md_table(g) << "\n";
}

// A report's section, rendered by the experiment that wrote it from its records.
void render_section(const CheckFolder& f, std::ostringstream& o, const Section& sec) {
  o << "## " << sec.title << "\n\n";
  auto it = f.reports.find(sec.report);
  if (it == f.reports.end()) {
    o << missing_report(f, sec.report) << "\n\n";
    return;
  }
  const Report& r = it->second;
  exp::DeviceSummaryInput in{r.cases, r.options, r.info.backend, r.info.device_name,
                             [&](double page_bytes) -> std::optional<exp::DeviceSummaryInput::Copy> {
                               const CopyRate* c = f.ceilings ? copy_for_page(*f.ceilings, page_bytes) : nullptr;
                               if (!c) return std::nullopt;
                               return exp::DeviceSummaryInput::Copy{c->mib, c->h2d_gbps};
                             }};
  try {
    o << exp::find_experiment(sec.experiment).device_summary(in);
  } catch (const std::exception& e) {
    // A report whose cases its experiment's records do not read (another build's, damaged).
    o << "unavailable: " << sec.report << ".h5: " << one_line(e.what()) << "\n\n";
  }
}

void render_torch_linear(const CheckFolder& f, std::ostringstream& o) {
  o << "## PyTorch's nn.Linear here, the recording and psi's dense path (`scripts/device-torch-linear.py`)\n\n";
  if (!f.torch_linear) {
    std::string why = "no torch-linear.json";
    for (const Step& s : f.steps)
      if (s.name == "torch-linear") why += " (step " + step_result(s) + (s.note.empty() ? "" : ": " + s.note) + ")";
    o << "unavailable: " << why << "\n\n";
    return;
  }
  const nlohmann::json& j = *f.torch_linear;
  const std::string torch = j.value("torch", std::string("?"));
  if (torch == "not installed")
    o << "PyTorch is not installed here: psi alone against the recording.";
  else
    o << "PyTorch " << torch << " on " << j.value("device", std::string("?")) << ".";
  o << " Differing BF16 elements between the results of each projection.\n\n";
  Table t;
  t.columns = {"projection", "elements", "psi backend", "PyTorch here vs recording", "psi vs PyTorch here",
               "psi vs recording"};
  const auto count = [](const nlohmann::json& row, const char* key) {
    return row.contains(key) ? fmt_count(row[key].get<long long>()) : std::string("- (no PyTorch)");
  };
  for (const auto& row : j.value("cases", nlohmann::json::array()))
    t.add_row({row.value("case", std::string()), fmt_count(row.value("elements", 0LL)),
               row.value("psi_backend", std::string()), count(row, "torch_vs_recorded"), count(row, "psi_vs_torch"),
               count(row, "psi_vs_recorded")});
  o << md_table(t) << "\n";
}

void render_tests(const CheckFolder& f, std::ostringstream& o) {
  o << "## Test programs on the device (`tests/test_cuda*` and those that branch on a CUDA device)\n\n";
  if (f.tests.empty()) {
    std::string why = "no test results";
    for (const Step& s : f.steps)
      if (s.name == "tests") why += " (step tests " + step_result(s) + (s.note.empty() ? "" : ": " + s.note) + ")";
    o << "unavailable: " << why << "\n\n";
    return;
  }
  Table t;
  t.columns = {"program", "tests", "passed", "skipped", "failed", "failed tests"};
  for (const TestProgram& p : f.tests) {
    std::string names;
    for (const auto& n : p.failures) names += (names.empty() ? "" : ", ") + n;
    t.add_row({p.name, std::to_string(p.tests), std::to_string(p.tests - p.failed - p.skipped - p.disabled),
               std::to_string(p.skipped), std::to_string(p.failed), names});
  }
  o << md_table(t) << "\n";
}

}  // namespace

Ceilings parse_ceilings(const std::string& text, const std::string& source) {
  Ceilings c;
  int n = 0;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    ++n;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const auto parsed = read_json_if_valid(line, source + ":" + std::to_string(n));
    const nlohmann::json j = parsed.value_or(nullptr);
    if (!j.is_object() || !j.contains("kind"))
      throw Error(source + ":" + std::to_string(n) + ": not a ceilings JSON line");
    const std::string kind = j.value("kind", std::string());
    try {
      if (kind == "copy")
        c.copies.push_back({j.at("MiB").get<double>(), j.at("h2d_GBps").get<double>(), j.at("d2h_GBps").get<double>()});
      else if (kind == "gemm")
        c.gemms.push_back({j.at("m").get<std::int64_t>(), j.at("n").get<std::int64_t>(), j.at("k").get<std::int64_t>(),
                           j.at("ms").get<double>(), j.at("TFLOPs").get<double>()});
    } catch (const nlohmann::json::exception&) {
      throw Error(source + ":" + std::to_string(n) + ": " + kind + " line lacks a field or has a non-number");
    }
  }
  return c;
}

const CopyRate* copy_for_page(const Ceilings& c, double page_bytes) {
  const CopyRate* best = nullptr;
  double best_d = 0;
  if (!(page_bytes > 0)) return nullptr;
  for (const auto& x : c.copies) {
    if (!(x.mib > 0) || !(x.h2d_gbps > 0)) continue;
    const double d = std::abs(std::log2(x.mib * 1048576.0 / page_bytes));
    if (!best || d < best_d) best = &x, best_d = d;
  }
  return best;
}

std::string CheckFolder::context_value(const std::string& key) const {
  for (const auto& [k, v] : context)
    if (k == key) return v;
  return "";
}

TestProgram parse_gtest_json(const std::string& name, const std::string& text) {
  const nlohmann::json j = read_json_if_valid(text, name + ".json").value_or(nullptr);
  if (!j.is_object()) throw Error(name + ".json: not GoogleTest JSON output");
  TestProgram p;
  p.name = name;
  for (const auto& suite : j.value("testsuites", nlohmann::json::array()))
    for (const auto& t : suite.value("testsuite", nlohmann::json::array())) {
      ++p.tests;
      const std::string result = t.value("result", std::string());
      if (t.contains("failures") && !t["failures"].empty()) {
        ++p.failed;
        p.failures.push_back(suite.value("name", std::string()) + "." + t.value("name", std::string()));
      } else if (result == "SKIPPED") {
        ++p.skipped;
      } else if (t.value("status", std::string()) == "NOTRUN") {
        ++p.disabled;
      }
    }
  return p;
}

CheckFolder read_check_folder(const std::filesystem::path& dir) {
  if (const std::string why = input_folder_problem(dir); !why.empty()) throw Error(dir.string() + ": " + why);
  // A folder scripts/device-check.sh did not write would give an empty summary and exit 0.
  if (!folder_holds(dir / "context.tsv") && !folder_holds(dir / "steps.tsv"))
    throw Error(dir.string() + ": not a device-check folder (no context.tsv or steps.tsv; scripts/device-check.sh "
                "writes them)");
  CheckFolder f;
  f.dir = dir;
  if (auto p = dir / "context.tsv"; folder_holds(p))
    for (const auto& l : lines_of(read_file(p))) {
      const auto tab = l.find('\t');
      f.context.emplace_back(l.substr(0, tab), tab == std::string::npos ? "" : l.substr(tab + 1));
    }
  if (auto p = dir / "steps.tsv"; folder_holds(p))
    for (const auto& l : lines_of(read_file(p))) {
      const auto cols = split(l, '\t');
      if (cols.size() < 3) throw Error(p.string() + ": line '" + l + "' has fewer than 3 tab-separated fields");
      Step s;
      s.name = cols[0];
      // Exit codes are 0..255 as a shell reports them; seconds a finite, non-negative number.
      const auto code = parse_whole(cols[1], 0, 255);
      const auto seconds = parse_real(cols[2]);
      if (!code || !seconds || *seconds < 0)
        throw Error(p.string() + ": line '" + l + "': exit code (0 to 255) and seconds (a non-negative number) "
                    "must be decimal numbers");
      s.exit_code = int(*code);
      s.seconds = *seconds;
      if (cols.size() > 3) s.note = cols[3];
      f.steps.push_back(s);
    }
  if (auto p = dir / "ceilings.jsonl"; folder_holds(p)) f.ceilings = parse_ceilings(read_file(p), p.string());
  for (const Section& sec : sections()) {
    const std::string& name = sec.report;
    const auto p = dir / (name + ".h5");
    if (!folder_holds(p)) continue;
    try {
      hdf5::StateReader r(p);
      Report rep;
      rep.info = r.run_info();
      rep.cases = read_json(r.read_text("/report/cases"), p.string() + ":/report/cases");
      rep.options = read_json(r.read_text("/report/options"), p.string() + ":/report/options");
      f.reports[name] = std::move(rep);
    } catch (const std::exception& e) {
      f.unreadable[name + ".h5"] = one_line(e.what());
    }
  }
  if (auto p = dir / "torch-linear.json"; folder_holds(p)) {
    try {
      f.torch_linear = read_json(read_file(p), p.string());
    } catch (const std::exception& e) {
      f.unreadable["torch-linear.json"] = one_line(e.what());
    }
  }
  std::error_code ec;
  const auto tests_type = std::filesystem::symlink_status(dir / "tests", ec).type();
  if (tests_type == std::filesystem::file_type::symlink)
    throw Error((dir / "tests").string() + ": a symbolic link in the check folder; psi device summary reads only the "
                "folder's own regular files");
  if (auto t = dir / "tests"; tests_type == std::filesystem::file_type::directory) {
    std::vector<std::filesystem::path> files;
    for (const auto& e : std::filesystem::directory_iterator(t))
      if (e.path().extension() == ".json") files.push_back(e.path());
    std::sort(files.begin(), files.end());
    for (const auto& p : files) f.tests.push_back(parse_gtest_json(p.stem().string(), read_file(p)));
  }
  return f;
}

std::vector<std::filesystem::path> check_folder_inputs(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> in{dir / "context.tsv", dir / "steps.tsv", dir / "ceilings.jsonl",
                                        dir / "torch-linear.json"};
  for (const Section& sec : sections()) in.push_back(dir / (sec.report + ".h5"));
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir / "tests", ec))
    if (e.path().extension() == ".json") in.push_back(e.path());
  return in;
}

std::string render_markdown(const CheckFolder& f) {
  std::ostringstream o;
  std::string device = f.context_value("device");
  for (const auto& [name, r] : f.reports)
    if (device.empty()) device = r.info.device_name;
  const std::string date = f.context_value("date");
  o << kSummaryTitle << (device.empty() ? "device unknown" : device) << " — "
    << (date.empty() ? "date unknown" : date) << "\n\n";
  render_context(f, o);
  render_steps(f, o);
  render_ceilings(f, o);
  for (const Section& sec : sections()) render_section(f, o, sec);
  render_torch_linear(f, o);
  render_tests(f, o);
  for (const auto& [file, why] : f.unreadable) o << "- " << file << " could not be read: " << why << "\n";
  return o.str();
}

nlohmann::json to_json(const CheckFolder& f) {
  nlohmann::json j;
  j["context"] = nlohmann::json::object();
  for (const auto& [k, v] : f.context) j["context"][k] = v;
  j["steps"] = nlohmann::json::array();
  for (const Step& s : f.steps)
    j["steps"].push_back({{"name", s.name}, {"exit_code", s.exit_code}, {"seconds", s.seconds}, {"note", s.note}});
  if (f.ceilings) {
    j["ceilings"]["copies"] = nlohmann::json::array();
    for (const auto& c : f.ceilings->copies)
      j["ceilings"]["copies"].push_back({{"MiB", c.mib}, {"h2d_GBps", c.h2d_gbps}, {"d2h_GBps", c.d2h_gbps}});
    j["ceilings"]["gemms"] = nlohmann::json::array();
    for (const auto& g : f.ceilings->gemms)
      j["ceilings"]["gemms"].push_back({{"m", g.m}, {"n", g.n}, {"k", g.k}, {"ms", g.ms}, {"TFLOPs", g.tflops}});
  }
  j["reports"] = nlohmann::json::object();
  for (const auto& [name, r] : f.reports)
    j["reports"][name] = {{"experiment", r.info.experiment},     {"backend", r.info.backend},
                          {"device_name", r.info.device_name},   {"psi_git_revision", r.info.psi_git_revision},
                          {"start_time_utc", r.info.start_time_utc}, {"end_time_utc", r.info.end_time_utc},
                          {"options", r.options},                {"cases", r.cases}};
  if (f.torch_linear) j["torch_linear"] = *f.torch_linear;
  j["unreadable"] = f.unreadable;
  j["tests"] = nlohmann::json::array();
  for (const TestProgram& p : f.tests)
    j["tests"].push_back({{"program", p.name}, {"tests", p.tests}, {"failed", p.failed}, {"skipped", p.skipped},
                          {"disabled", p.disabled}, {"failures", p.failures}});
  return j;
}

}  // namespace psi::device_check
