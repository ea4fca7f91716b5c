#include "device_check/summary.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

#include "engine/error.h"
#include "engine/model/weights.h"
#include "experiments/gpu_memory_cells.h"
#include "report/stats.h"
#include "report/table.h"

namespace psi::device_check {

// The report layer's tables, formats and statistics, so the summary reads like the reports.
using report::Format;
using report::Table;
using report::fmt_count;
using report::fmt_fixed;
using report::fmt_mib;
using report::fmt_sci;
using exp::gpu_device_peak_cell;
using exp::gpu_memory_note;
using exp::gpu_process_peak_cell;
using report::mean;
using report::render;
using report::sample_sd;

namespace {

std::string read_file(const std::filesystem::path& p) {
  std::error_code ec;
  // A fifo or device in the folder would block the read or never end.
  if (!std::filesystem::is_regular_file(p, ec)) throw Error(p.string() + ": not a regular file");
  std::ifstream in(p, std::ios::binary);
  if (!in) throw Error(p.string() + ": cannot be read");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
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

double num(const nlohmann::json& j, const char* key) {
  return j.contains(key) && j[key].is_number() ? j[key].get<double>() : std::nan("");
}

std::string ms(double seconds, int decimals = 2) { return fmt_fixed(seconds * 1e3, decimals); }

// Bytes as MiB, or "-" when the report lacks the number.
std::string amount(double bytes) { return std::isfinite(bytes) ? fmt_mib(bytes) : "-"; }

// A table without the "### title" line that render() writes even for an empty title.
std::string md_table(const Table& t) {
  std::string s = render({t}, Format::markdown);
  const std::string untitled = "### \n\n";
  if (t.title.empty() && s.rfind(untitled, 0) == 0) s.erase(0, untitled.size());
  return s;
}

// The experiment reports a check folder may hold, in the order the summary shows them.
const std::vector<std::string>& report_names() {
  static const std::vector<std::string> names{"scheduling", "scheduling-fit", "capacity", "block-controls", "probes"};
  return names;
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

std::string bytes_pair(const nlohmann::json& run, const char* a, const char* b) {
  return amount(num(run, a)) + " / " + amount(num(run, b));
}

// `name`: the report (scheduling, or scheduling-fit: the same at the row tile that fits).
void render_scheduling(const CheckFolder& f, std::ostringstream& o, const std::string& name, const std::string& title) {
  o << "## " << title << "\n\n";
  auto it = f.reports.find(name);
  if (it == f.reports.end()) {
    o << missing_report(f, name) << "\n\n";
    return;
  }
  const Report& r = it->second;
  const SchedulingSummary s = summarize_scheduling(r.cases);
  const std::string model = r.options.value("model", std::string()), profile = r.options.value("profile", std::string("ltx25"));
  std::optional<double> weights;
  std::string weights_why;
  try {
    weights = double(block_weight_bytes(model::model_config(model, profile)));
  } catch (const Error& e) {
    weights_why = e.what();
  }
  double page = 0;
  for (const auto& row : s.schedules)
    if (!row.run.is_null()) page = num(row.run, "page_bytes");
  const CopyRate* copy = f.ceilings ? copy_for_page(*f.ceilings, page) : nullptr;

  Table t;
  t.columns = {"schedule", "block (ms, mean ± SD, n)", "transfer floor (ms)", "block / floor", "whole run (ms)",
               "weights streamed", "floor of the bytes streamed (ms)", "block / that floor", "managed peak / bound",
               "scratch / workspace high water", "process peak (NVML)", "device used peak (NVML)",
               "probes = first run's (fewest)", "probes = CPU block (fewest)"};
  bool any_resident = false, any_block_time = false;
  for (const ScheduleRow& row : s.schedules) {
    if (row.run.is_null()) {
      t.add_row({row.name, row.outcome, "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-"});
      continue;
    }
    any_resident = any_resident || row.resident;
    any_block_time = any_block_time || !row.blocks_s.empty();
    const auto& times = row.block_times();
    const double block = mean(times);
    const double streamed = row.run.contains("h2d_bytes") ? num(row.run["h2d_bytes"], "weights") : std::nan("");
    std::string floor = "unavailable", ratio = "unavailable", sfloor = "unavailable", sratio = "unavailable";
    if (copy && weights) {
      const double fl = transfer_seconds(*weights, copy->h2d_gbps);
      floor = ms(fl);
      if (!times.empty()) ratio = fmt_fixed(block / fl, 2);
    }
    if (copy && std::isfinite(streamed)) {
      const double fl = transfer_seconds(streamed, copy->h2d_gbps);
      sfloor = ms(fl);
      if (!times.empty()) sratio = fmt_fixed(block / fl, 2);
    }
    const auto fewest = [](int n, const char* absent) { return n < 0 ? std::string(absent) : std::to_string(n) + " / 10"; };
    t.add_row({row.name,
               times.empty() ? "no measured run"
                             : ms(block) + " ± " + ms(sample_sd(times)) + " (" + std::to_string(times.size()) + ")",
               floor, ratio,
               row.walls_s.empty() ? "-" : ms(mean(row.walls_s)) + " ± " + ms(sample_sd(row.walls_s)),
               amount(streamed), sfloor, sratio, bytes_pair(row.run, "managed_peak_bytes", "bound_bytes"),
               bytes_pair(row.run, "scratch_high_water_bytes", "workspace_high_water_bytes"),
               gpu_process_peak_cell(row.run), gpu_device_peak_cell(row.run),
               fewest(row.probes_equal_first_min, "not recorded"), fewest(row.probes_equal_host_min, "not checked")});
  }
  o << md_table(t) << "\n";
  o << "- ten probes bitwise equal across the schedules: **" << s.probes_equal_across << " of " << s.probe_names
    << "** probes have one SHA-256 in all " << s.completed_runs << " completed runs\n";
  if (any_block_time)
    o << "- block time: the block's own (`block_s`: from journaling its inputs to its probes collected; runtime "
         "set-up, planning and preloading outside it), "
      << (any_resident ? "its weights made host-resident before it" : "its weights produced by the weight source inside it")
      << ", over the measured cycles (warm-up excluded); whole run: the same runs' wall time\n";
  else
    o << "- block time: the whole run's wall time (the report records no separate block time)\n";
  o << "- probes = CPU block: the CPU backend's host block (`block_forward`), SHA-256; \"not checked\" where the "
       "scheduling report does not compare with it (on CUDA the products are cuBLASLt's: docs/cuda-backend.md)\n";
  if (!s.schedules.empty() && !s.schedules.front().run.is_null()) {
    const auto& run = s.schedules.front().run;
    o << "- " << gpu_memory_note(run) << "\n";
    o << "- arena " << amount(num(run, "arena_bytes")) << ": pages " << amount(num(run, "page_bytes"))
      << ", workspace " << amount(num(run, "workspace_bytes")) << ", scratch " << amount(num(run, "scratch_bytes"))
      << " (" << s.arena << "); backend " << run.value("backend", std::string("?")) << "\n";
  }
  if (weights && copy)
    o << "- transfer floor = one block's BF16 weights, " << fmt_count((long long)*weights) << " bytes, over the pinned "
      << "H2D rate at the copy size nearest the page (" << fmt_mib(copy->mib * 1048576.0) << ": "
      << fmt_fixed(copy->h2d_gbps, 2) << " GB/s, measured by this check); the second floor puts the weight bytes "
      << "the schedule actually streamed over the same rate\n";
  else
    o << "- transfer floor unavailable: "
      << (!weights ? "block weights unknown (" + weights_why + ")" : std::string("no measured H2D copy rate")) << "\n";
  std::string row_tile = "the config's default";
  for (const auto& c : r.cases)
    if (c.contains("row_tile")) row_tile = std::to_string(c["row_tile"].get<long long>()) + " rows";
  o << "- inputs: " << s.inputs << "; model " << model << " (" << profile << "); row tile " << row_tile << "\n\n";
}

void render_capacity(const CheckFolder& f, std::ostringstream& o) {
  o << "## Arena and page settings (`psi run capacity`)\n\n";
  auto it = f.reports.find("capacity");
  if (it == f.reports.end()) {
    o << missing_report(f, "capacity") << "\n\n";
    return;
  }
  Table t;
  t.columns = {"arena / page", "outcome", "wall (ms)", "managed peak / bound", "scratch high water",
               "bitwise equal to the reference setting"};
  std::string ref;
  for (const auto& c : it->second.cases) {
    ref = c.value("reference", std::string());
    if (c.value("outcome", std::string()) == "complete" && c.contains("run")) {
      t.add_row({c.value("setting", std::string()), "complete", ms(num(c, "wall_s"), 1),
                 bytes_pair(c["run"], "managed_peak_bytes", "bound_bytes"),
                 amount(num(c["run"], "scratch_high_water_bytes")),
                 c.value("bitwise_equal_to_reference", false) ? "yes" : "NO"});
    } else {
      t.add_row({c.value("setting", std::string()), c.value("outcome", std::string("?")), "-", "-", "-", "-"});
    }
  }
  o << md_table(t) << "\n- reference setting: " << ref << "\n\n";
}

void render_block_controls(const CheckFolder& f, std::ostringstream& o) {
  o << "## Relative L2 to the recorded official MATH block (`psi run block-controls`)\n\n";
  auto it = f.reports.find("block-controls");
  if (it == f.reports.end()) {
    o << missing_report(f, "block-controls") << "\n\n";
    return;
  }
  const Report& r = it->second;
  std::vector<std::string> tensors;
  std::map<std::string, std::map<std::string, std::string>> cell;  // tensor -> column -> text
  std::string case_name;
  for (const auto& c : r.cases) {
    case_name = c.value("case", std::string());
    for (const auto& row : c.value("rows", nlohmann::json::array())) {
      if (!row.contains("rel_l2") || row.value("backend", std::string()) != "math") continue;
      const std::string tensor = row.value("tensor", std::string());
      if (std::find(tensors.begin(), tensors.end(), tensor) == tensors.end()) tensors.push_back(tensor);
      cell[tensor][row.value("variant", std::string())] =
          fmt_sci(num(row, "rel_l2")) + " (" + fmt_count((long long)num(row, "differing")) + " / " +
          fmt_count((long long)num(row, "total")) + ")";
    }
    for (const auto& row : c.value("official_flash_vs_math", nlohmann::json::array()))
      cell[row.value("tensor", std::string())]["flash"] = fmt_sci(num(row, "rel_l2"));
  }
  Table t;
  t.columns = {"probe", "psi dense", "psi baseline", "psi modified", "official FLASH (recorded)"};
  for (const auto& tensor : tensors) {
    auto& c = cell[tensor];
    auto get = [&](const char* k) { return c.count(k) ? c[k] : std::string("-"); };
    t.add_row({tensor, get("dense"), get("baseline"), get("modified"), get("flash")});
  }
  o << md_table(t) << "\n- case " << case_name << "; relative L2 (differing / total BF16 elements) against the recorded "
    << "MATH tensors (video probes: the recorded rows); report backend attribute: " << r.info.backend
    << ", device: " << r.info.device_name << "\n\n";
}

void render_probes(const CheckFolder& f, std::ostringstream& o) {
  o << "## Operator probes (`psi run probes`)\n\n";
  auto it = f.reports.find("probes");
  if (it == f.reports.end()) {
    o << missing_report(f, "probes") << "\n\n";
    return;
  }
  Table t;
  t.columns = {"case", "tensor", "variant", "vs", "differing / total", "rel L2"};
  for (const auto& c : it->second.cases)
    for (const auto& row : c.value("rows", nlohmann::json::array()))
      if (row.contains("rel_l2") && row.value("backend", std::string()) != "flash")
        t.add_row({c.value("case", std::string()), row.value("tensor", std::string()),
                   row.value("variant", std::string()), row.value("backend", std::string()),
                   fmt_count((long long)num(row, "differing")) + " / " + fmt_count((long long)num(row, "total")),
                   fmt_sci(num(row, "rel_l2"))});
  o << md_table(t) << "\n";
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
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("kind"))
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

std::uint64_t block_weight_bytes(const model::ModelConfig& c) {
  std::uint64_t n = 0;
  for (const auto& w : model::block_weight_specs(c, 0)) n += std::uint64_t(numel(w.shape));
  return n * 2;
}

SchedulingSummary summarize_scheduling(const nlohmann::json& cases) {
  SchedulingSummary s;
  std::map<std::string, std::size_t> index;
  std::map<std::string, std::set<std::string>> hashes;  // probe -> distinct SHA-256 over runs
  for (const auto& c : cases) {
    const std::string name = c.value("schedule", std::string());
    if (!index.count(name)) {
      index[name] = s.schedules.size();
      s.schedules.push_back({});
      s.schedules.back().name = name;
    }
    ScheduleRow& row = s.schedules[index[name]];
    s.arena = c.value("arena", s.arena);
    s.inputs = c.value("inputs", s.inputs);
    const std::string outcome = c.value("outcome", std::string());
    if (outcome != "complete") {
      if (row.outcome == "complete") row.outcome = outcome;
      continue;
    }
    ++row.runs;
    ++s.completed_runs;
    if (!c.value("warmup", false)) {
      if (c.contains("wall_s")) row.walls_s.push_back(num(c, "wall_s"));
      if (c.contains("block_s")) row.blocks_s.push_back(num(c, "block_s"));
    }
    row.resident = row.resident || c.value("weights", std::string()) == "host-resident";
    const auto fewest = [&](const char* key, int& into) {
      if (!c.contains(key) || !c[key].is_number()) return;
      const int e = c[key].get<int>();
      into = into < 0 ? e : std::min(into, e);
    };
    fewest("probes_equal_first", row.probes_equal_first_min);
    fewest("probes_equal_host", row.probes_equal_host_min);
    if (c.contains("probe_sha256"))
      for (const auto& [probe, sha] : c["probe_sha256"].items()) hashes[probe].insert(sha.get<std::string>());
    if (c.contains("run")) row.run = c["run"];
  }
  // A probe counts as equal across runs only if every completed run hashed it once, alike.
  for (const auto& [probe, set] : hashes) {
    ++s.probe_names;
    int seen = 0;
    for (const auto& c : cases)
      if (c.value("outcome", std::string()) == "complete" && c.contains("probe_sha256") && c["probe_sha256"].contains(probe))
        ++seen;
    if (set.size() == 1 && seen == s.completed_runs) ++s.probes_equal_across;
  }
  return s;
}

std::string CheckFolder::context_value(const std::string& key) const {
  for (const auto& [k, v] : context)
    if (k == key) return v;
  return "";
}

TestProgram parse_gtest_json(const std::string& name, const std::string& text) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) throw Error(name + ".json: not GoogleTest JSON output");
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
  if (!std::filesystem::is_directory(dir)) throw Error(dir.string() + ": no such folder");
  // A folder scripts/device-check.sh did not write would give an empty summary and exit 0.
  if (!std::filesystem::exists(dir / "context.tsv") && !std::filesystem::exists(dir / "steps.tsv"))
    throw Error(dir.string() + ": not a device-check folder (no context.tsv or steps.tsv; scripts/device-check.sh "
                "writes them)");
  CheckFolder f;
  f.dir = dir;
  if (auto p = dir / "context.tsv"; std::filesystem::exists(p))
    for (const auto& l : lines_of(read_file(p))) {
      const auto tab = l.find('\t');
      f.context.emplace_back(l.substr(0, tab), tab == std::string::npos ? "" : l.substr(tab + 1));
    }
  if (auto p = dir / "steps.tsv"; std::filesystem::exists(p))
    for (const auto& l : lines_of(read_file(p))) {
      const auto cols = split(l, '\t');
      if (cols.size() < 3) throw Error(p.string() + ": line '" + l + "' has fewer than 3 tab-separated fields");
      Step s;
      s.name = cols[0];
      try {
        s.exit_code = std::stoi(cols[1]);
        s.seconds = std::stod(cols[2]);
      } catch (const std::exception&) {
        throw Error(p.string() + ": line '" + l + "': exit code and seconds must be numbers");
      }
      if (cols.size() > 3) s.note = cols[3];
      f.steps.push_back(s);
    }
  if (auto p = dir / "ceilings.jsonl"; std::filesystem::exists(p)) f.ceilings = parse_ceilings(read_file(p), p.string());
  for (const std::string& name : report_names()) {
    const auto p = dir / (name + ".h5");
    if (!std::filesystem::exists(p)) continue;
    try {
      hdf5::StateReader r(p);
      Report rep;
      rep.info = r.run_info();
      rep.cases = nlohmann::json::parse(r.read_text("/report/cases"));
      rep.options = nlohmann::json::parse(r.read_text("/report/options"));
      f.reports[name] = std::move(rep);
    } catch (const std::exception& e) {
      f.unreadable[name + ".h5"] = one_line(e.what());
    }
  }
  if (auto p = dir / "torch-linear.json"; std::filesystem::exists(p)) {
    try {
      f.torch_linear = nlohmann::json::parse(read_file(p));
    } catch (const std::exception& e) {
      f.unreadable["torch-linear.json"] = one_line(e.what());
    }
  }
  if (auto t = dir / "tests"; std::filesystem::is_directory(t)) {
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
  for (const std::string& name : report_names()) in.push_back(dir / (name + ".h5"));
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
  render_scheduling(f, o, "scheduling", "First block, four schedules (`psi run scheduling`)");
  render_scheduling(f, o, "scheduling-fit",
                    "The same at the largest row tile that fits the arena (`psi run scheduling --row-tile fit`)");
  render_capacity(f, o);
  render_block_controls(f, o);
  render_probes(f, o);
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
