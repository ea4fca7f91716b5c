// Every named experiment run through the psi binary at reduced size: exit status, report
// structure, re-rendering from the file, and the bitwise claims each one makes.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <algorithm>
#include <variant>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/error.h"
#include "engine/exec/executor.h"
#include "engine/measure/sizes.h"
#include "engine/model/variant.h"
#include "engine/sha256.h"
#include "experiments/block_support.h"
#include "experiments/experiment.h"
#include "experiments/report.h"
#include "experiments/trajectory_support.h"
#include "hdf5/h5.h"
#include "hdf5/state_file.h"
#include "report/diff_figures.h"
#include "report/table.h"
#include "tests/recordings.h"

namespace fs = std::filesystem;
using namespace psi;

namespace {

struct CmdResult {
  int status;
  std::string out;
};

// Runs `psi <args>` with stdout and stderr captured.
CmdResult psi_cmd(const std::string& args) {
  const std::string cmd = std::string(PSI_BINARY) + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  std::array<char, 4096> buf;
  while (std::size_t n = std::fread(buf.data(), 1, buf.size(), p)) out.append(buf.data(), n);
  const int st = pclose(p);
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, out};
}

class Experiments : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("psi_exp_test_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

nlohmann::json read_json(const fs::path& f, const std::string& ds) {
  return nlohmann::json::parse(hdf5::File::open_read(f).read_text(ds));
}

void expect_report_structure(const fs::path& f, const std::string& experiment) {
  ASSERT_TRUE(fs::exists(f)) << f;
  hdf5::StateReader r(f);
  EXPECT_EQ(r.run_info().experiment, experiment);
  EXPECT_FALSE(r.run_info().command_line.empty());
  EXPECT_TRUE(r.file().exists("/report/cases"));
  const auto tables = read_json(f, "/report/tables");
  ASSERT_TRUE(tables.is_array());
  ASSERT_FALSE(tables.empty());
  for (auto& t : tables) EXPECT_FALSE(t["rows"].empty()) << t["title"];
  // Which fields measure time is written, never left to a reader's guess: the cases' keys beside
  // them, each table's time columns in it (one of its columns each).
  const auto declared = r.file().attr("/report/cases", "time_fields");
  ASSERT_TRUE(declared && std::holds_alternative<std::string>(*declared));
  EXPECT_EQ(nlohmann::json::parse(std::get<std::string>(*declared)),
            nlohmann::json(exp::find_experiment(experiment).time_fields()));
  // So are the keys that name a path (an experiment with none declares an empty list), and the
  // tables' provenance lines.
  const auto paths = r.file().attr("/report/cases", "provenance_fields");
  ASSERT_TRUE(paths && std::holds_alternative<std::string>(*paths));
  const auto& of = exp::find_experiment(experiment).provenance_fields;
  EXPECT_EQ(nlohmann::json::parse(std::get<std::string>(*paths)),
            nlohmann::json(of ? of() : std::vector<std::string>{}));
  const auto table_paths = r.file().attr("/report/tables", "provenance_fields");
  ASSERT_TRUE(table_paths && std::holds_alternative<std::string>(*table_paths));
  EXPECT_EQ(std::get<std::string>(*table_paths), R"(["provenance"])");
  for (auto& t : tables) {
    ASSERT_TRUE(t.contains("time_columns")) << t["title"];
    for (auto& c : t["time_columns"])
      EXPECT_NE(std::find(t["columns"].begin(), t["columns"].end(), c), t["columns"].end()) << t["title"] << ": " << c;
  }
  for (auto& e : fs::directory_iterator(f.parent_path()))
    EXPECT_EQ(e.path().string().find(".tmp."), std::string::npos) << "temporary file left: " << e.path();
}

// Every case a driver wrote reads back into its typed record and writes again byte for byte:
// one field list per experiment's record (experiments/record_fields.h); the index is the Report's.
void expect_records_round_trip(const std::string& experiment, const nlohmann::json& cases) {
  ASSERT_FALSE(cases.empty());
  for (const auto& c : cases) {
    nlohmann::json again = exp::find_experiment(experiment).reread(c);
    again["index"] = c.at("index");
    EXPECT_EQ(again.dump(), c.dump());
  }
}

// The column of `t` (a stored table) named `name`; fails the test when there is none.
std::size_t column_of(const nlohmann::json& t, const std::string& name) {
  const auto& cols = t.at("columns");
  const auto it = std::find(cols.begin(), cols.end(), name);
  EXPECT_NE(it, cols.end()) << name << " in " << cols.dump();
  return std::size_t(it - cols.begin());
}

// Table III as the paper prints it: each path's wall is the sum of its recorded invocation walls,
// its peak the process's resident peak on the CPU backend, named as such, and the table has its
// paper line.
void expect_table_iii(const nlohmann::json& cases, const nlohmann::json& t) {
  const std::size_t sum_col = column_of(t, "wall (s, sum of the invocations)"),
                    peak_col = column_of(t, "process peak (host resident, VmHWM, CPU backend)"),
                    path_col = column_of(t, "path"), mode_col = column_of(t, "mode"), context_col = column_of(t, "context");
  EXPECT_EQ(sum_col, 3u);  // the paper's columns come before psi's own
  EXPECT_EQ(peak_col, 4u);
  std::size_t rows = 0;
  for (const auto& c : cases) {
    if (!c.contains("states")) continue;
    const nlohmann::json* row = nullptr;
    for (const auto& r : t["rows"])
      if (r[context_col] == c["context"] && r[path_col] == c["path"] && r[mode_col] == c["mode"]) row = &r;
    ASSERT_NE(row, nullptr) << c["context"] << " " << c["path"] << " " << c["mode"];
    ++rows;
    double sum = 0;
    ASSERT_EQ(c["per_invocation"].size(), 11u) << c["path"];
    for (const auto& i : c["per_invocation"]) sum += i["wall_s"].get<double>();
    EXPECT_EQ((*row)[sum_col], report::fmt_fixed(sum, 3)) << c["path"];
    EXPECT_EQ(c["process_peak_kind"], "host resident, VmHWM, CPU backend");
    const auto peak = c["process_peak_bytes"].get<std::uint64_t>();
    EXPECT_GT(peak, 0u);
    EXPECT_EQ((*row)[peak_col], report::fmt_mib(double(peak))) << c["path"];
  }
  EXPECT_EQ(rows, t["rows"].size());
  bool paper = false;
  for (const auto& n : t["notes"]) paper = paper || n.get<std::string>().starts_with("paper (Table III");
  EXPECT_TRUE(paper) << t["notes"].dump();
}

std::string signed_sci(double v) { return (v >= 0 ? "+" : "") + report::fmt_sci(v); }

bool has_note(const nlohmann::json& t, const std::string& text) {
  for (const auto& n : t["notes"])
    if (n.get<std::string>().find(text) != std::string::npos) return true;
  return false;
}

// Table II as the paper prints it: per path the summed invocation wall (mean ± SD over the
// cases) and the process peak (the largest of its cases'), then the counts of cases where modified
// beats baseline and the mean paired Δ against official-h200, each recomputed here from the
// records and from the per-case rows.
void expect_table_ii(const nlohmann::json& cases, const nlohmann::json& tables) {
  ASSERT_GE(tables.size(), 2u);
  const nlohmann::json &t = tables[0], &per_case = tables[1];
  const std::size_t wall_col = column_of(t, "wall (s, sum of the invocations; mean ± SD over the cases)"),
                    peak_col = column_of(t, "process peak (host resident, VmHWM, CPU backend)");
  for (const auto& row : t["rows"]) {
    const std::string path = row[0];
    std::vector<double> sums;
    std::uint64_t peak = 0;
    for (const auto& c : cases) {
      const auto& p = c["paths"][path];
      double sum = 0;
      for (const auto& i : p["per_invocation"]) sum += i["wall_s"].get<double>();
      sums.push_back(sum);
      peak = std::max(peak, p["process_peak_bytes"].get<std::uint64_t>());
    }
    double m = 0, ss = 0;
    for (double x : sums) m += x;
    m /= double(sums.size());
    for (double x : sums) ss += (x - m) * (x - m);
    const double sd = sums.size() < 2 ? 0.0 : std::sqrt(ss / double(sums.size() - 1));
    EXPECT_EQ(row[wall_col], report::fmt_fixed(m, 3) + " ± " + report::fmt_fixed(sd, 3)) << path;
    EXPECT_EQ(row[peak_col], report::fmt_mib(double(peak))) << path;
  }
  EXPECT_EQ(t["rows"].size(), 5u);  // dense, official-h200, official-h200-flash, baseline, modified
  int beats_video = 0, beats_audio = 0, rows_video = 0, rows_audio = 0;
  double delta_video = 0, delta_audio = 0;
  for (const auto& c : cases) {
    const auto &b = c["paths"]["baseline"], &m = c["paths"]["modified"];
    beats_video += m["official_video_rel_l2"].get<double>() < b["official_video_rel_l2"].get<double>();
    beats_audio += m["official_audio_rel_l2"].get<double>() < b["official_audio_rel_l2"].get<double>();
    delta_video += m["official_video_rel_l2"].get<double>() - b["official_video_rel_l2"].get<double>();
    delta_audio += m["official_audio_rel_l2"].get<double>() - b["official_audio_rel_l2"].get<double>();
  }
  const std::size_t beats_col = column_of(per_case, "modified beats baseline (video / audio)");
  for (const auto& row : per_case["rows"]) {
    const std::string cell = row[beats_col];
    rows_video += cell.starts_with("yes");
    rows_audio += cell.ends_with("yes");
  }
  EXPECT_EQ(per_case["rows"].size(), cases.size());
  EXPECT_EQ(rows_video, beats_video);
  EXPECT_EQ(rows_audio, beats_audio);
  const std::string n = std::to_string(cases.size());
  EXPECT_TRUE(has_note(t, "video " + std::to_string(beats_video) + "/" + n + ", audio " + std::to_string(beats_audio) +
                              "/" + n + " cases"))
      << t["notes"].dump();
  EXPECT_TRUE(has_note(t, signed_sci(delta_video / double(cases.size())) + " video, " +
                              signed_sci(delta_audio / double(cases.size())) + " audio."))
      << t["notes"].dump();
  EXPECT_TRUE(has_note(t, "paper (Table II and its text, LTX-2 22B: modified beats baseline in 5/9 video and 3/9 audio"))
      << t["notes"].dump();
  EXPECT_TRUE(has_note(t, "reference: official-h200")) << t["notes"].dump();
}

// Table V: every setting's scratch needed against what it leaves (arena − 2 × page − workspace),
// a complete run's scratch high-water mark within it, and the smallest settings from the plan.
void expect_table_v(const nlohmann::json& cases, const nlohmann::json& t) {
  const std::size_t need_col = column_of(t, "scratch needed / available"), high_col = column_of(t, "scratch high-water");
  ASSERT_EQ(t["rows"].size(), cases.size());
  const auto need = cases[0]["scratch_need_bytes"].get<std::uint64_t>();
  const auto workspace = cases[0]["workspace_bytes"].get<std::uint64_t>();
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const auto& c = cases[i];
    const auto& row = t["rows"][i];
    EXPECT_EQ(c["scratch_need_bytes"].get<std::uint64_t>(), need);  // the plan's, whatever the setting
    const auto scratch = c["arena_bytes"].get<std::uint64_t>() - 2 * c["page_bytes"].get<std::uint64_t>() -
                         c["workspace_bytes"].get<std::uint64_t>();
    EXPECT_EQ(row[need_col], report::fmt_mib(double(need)) + " / " + report::fmt_mib(double(scratch)));
    if (c["outcome"] == "complete") {
      EXPECT_LE(need, scratch) << c["setting"];
      const auto high = c["run"]["scratch_high_water_bytes"].get<std::uint64_t>();
      EXPECT_LE(high, need) << c["setting"];
      EXPECT_EQ(row[high_col], report::fmt_mib(double(high)));
    }
  }
  const auto tile = rt::align_up(cases[0]["largest_tile_bytes"].get<std::uint64_t>());
  EXPECT_TRUE(has_note(t, "smallest page that completes: " + rt::format_capacity(tile))) << t["notes"].dump();
  EXPECT_TRUE(has_note(t, rt::format_capacity(std::uint64_t(cases[0]["page_bytes"])) + " pages: " +
                              report::fmt_count((long long)(2 * cases[0]["page_bytes"].get<std::uint64_t>() + workspace + need)) +
                              " bytes"))
      << t["notes"].dump();
  EXPECT_TRUE(has_note(t, "paper (Table V, LTX-2 22B: the 48 and 64 MiB arenas with 8 MiB pages exhaust scratch"))
      << t["notes"].dump();
}

// Table VI: the MATH, FLASH and psi rows with a peak memory cell of each one's kind, and the
// errors the records hold.
void expect_table_vi(const nlohmann::json& bc, const nlohmann::json& t) {
  const std::size_t peak_col = column_of(t, "peak memory"), video_col = column_of(t, "video_out rel L2");
  ASSERT_GE(t["rows"].size(), 7u);
  EXPECT_EQ(t["rows"][0][0], "official MATH (recorded)");
  EXPECT_EQ(t["rows"][0][video_col], report::fmt_sci(0.0));
  EXPECT_EQ(t["rows"][0][peak_col], report::fmt_mib(double(bc["official_math_peak_bytes"].get<std::uint64_t>())) +
                                        " (recording GPU, torch max_memory_allocated)");
  EXPECT_EQ(t["rows"][1][0], "official FLASH (recorded)");
  EXPECT_EQ(t["rows"][1][peak_col], report::fmt_mib(double(bc["official_flash_peak_bytes"].get<std::uint64_t>())) +
                                        " (recording GPU, torch max_memory_allocated)");
  // The recordings' own figures (block_small.h5's timing_and_memory).
  EXPECT_EQ(bc["official_math_peak_bytes"].get<std::uint64_t>(), 74652160u);
  EXPECT_EQ(bc["official_flash_peak_bytes"].get<std::uint64_t>(), 62941696u);
  for (std::size_t i = 2; i < t["rows"].size(); ++i) {
    const std::string path = t["rows"][i][0];
    ASSERT_TRUE(path.starts_with("psi ")) << path;
    const auto& peak = bc["process_peaks"][path.substr(4)];
    EXPECT_EQ(t["rows"][i][peak_col], report::fmt_mib(double(peak["process_peak_bytes"].get<std::uint64_t>())) +
                                          " (host resident, VmHWM, CPU backend)");
  }
  EXPECT_TRUE(has_note(t, "paper (Table VI, RTX A6000, real weights: rows MATH, FLASH and native")) << t["notes"].dump();
}

}  // namespace

// The keys that measure time are declared by each record's field list (measures_time,
// holds_time), nested records included, and nothing else is: the record, not a key's words.
TEST(ExperimentRecords, TimeFieldsAreWhatTheRecordsDeclare) {
  using V = std::vector<std::string>;
  EXPECT_EQ(exp::find_experiment("capacity").time_fields(), (V{"block_s", "wall_s"}));
  EXPECT_EQ(exp::find_experiment("scheduling").time_fields(), (V{"block_s", "preload_s", "wall_s"}));
  EXPECT_EQ(exp::find_experiment("probes").time_fields(), (V{"seconds"}));
  EXPECT_EQ(exp::find_experiment("one-token").time_fields(),
            (V{"float64_wall_mean_s", "float64_wall_sd_s", "process_peak_bytes", "wall_mean_s", "wall_s", "wall_sd_s"}));
  // A process peak is measured on the machine as a time is (experiments/process_peak.h).
  EXPECT_EQ(exp::find_experiment("full-prompt").time_fields(),
            (V{"process_peak_bytes", "wall_mean_s", "wall_s", "wall_sd_s"}));
  EXPECT_EQ(exp::find_experiment("block-controls").time_fields(), V{"process_peak_bytes"});
  EXPECT_EQ(exp::find_experiment("projection-oracle").time_fields(), V{});
  for (const exp::Experiment& e : exp::experiments()) EXPECT_TRUE(e.time_fields) << e.name;
}

// So are the keys that name a path (provenance): the recordings' and the state files' paths as
// given, nothing by its name.
TEST(ExperimentRecords, ProvenanceFieldsAreWhatTheRecordsDeclare) {
  using V = std::vector<std::string>;
  EXPECT_EQ(exp::find_experiment("probes").provenance_fields(), V{"file"});
  EXPECT_EQ(exp::find_experiment("block-controls").provenance_fields(), V{"file"});
  EXPECT_EQ(exp::find_experiment("projection-oracle").provenance_fields(), V{"file"});
  EXPECT_EQ(exp::find_experiment("transport-control").provenance_fields(), (V{"compared_to", "file"}));
  EXPECT_EQ(exp::find_experiment("one-token").provenance_fields(), V{"reference_file"});
  EXPECT_EQ(exp::find_experiment("scheduling").provenance_fields(), V{});
  for (const exp::Experiment& e : exp::experiments()) EXPECT_TRUE(e.provenance_fields) << e.name;
}

TEST_F(Experiments, ListAndUnknownName) {
  // Every experiment, in the study's order: each registers itself from its own file, which the
  // linker would drop unless the library is linked whole.
  CmdResult l = psi_cmd("list");
  EXPECT_EQ(l.status, 0);
  std::vector<std::string> listed;
  std::istringstream lines(l.out);
  for (std::string line; std::getline(lines, line);) listed.push_back(line.substr(0, line.find(' ')));
  EXPECT_EQ(listed, (std::vector<std::string>{"memory-scopes", "full-prompt", "one-token", "scheduling", "capacity",
                                              "block-controls", "fixed-budget", "transport-control", "probes",
                                              "projection-oracle"}));
  CmdResult u = psi_cmd("run no-such-table --out " + (dir_ / "x.h5").string());
  EXPECT_EQ(u.status, 2);
  EXPECT_NE(u.out.find("unknown experiment 'no-such-table' (valid: "), std::string::npos) << u.out;
  EXPECT_FALSE(fs::exists(dir_ / "x.h5"));
  CmdResult m = psi_cmd("run one-token --model huge --out " + (dir_ / "x.h5").string());
  EXPECT_EQ(m.status, 2) << m.out;
  EXPECT_FALSE(fs::exists(dir_ / "x.h5"));
}

// one-token: the replay's initial states are the recorded ones bit for bit; the teacher-forced
// and free-running first steps agree bit for bit; psi report re-renders the table.
TEST_F(Experiments, OneToken) {
  const fs::path f = dir_ / "one_token.h5";
  CmdResult r = psi_cmd("run one-token --out " + f.string());
  ASSERT_EQ(r.status, 0) << r.out;
  expect_report_structure(f, "one-token");
  auto rf = hdf5::File::open_read(f);
  auto rec = hdf5::File::open_read(psi::test::reference_file("probe_attn_traj.h5"));
  // Every variant but the FLASH claimant: the recorded trajectories are MATH runs.
  std::vector<std::string> replayed;
  for (const auto& v : psi::model::numerics_variants())
    if (v.claims != "flash") replayed.push_back(v.name);
  for (const std::string& path : replayed) {
    const std::string g = "/states/one-token/" + path;
    EXPECT_EQ(sha256_hex(rf.read_bf16(g + "/free_running/00_stage1_initial/video_latent")),
              sha256_hex(rec.read_bf16("/trajectory_tiny/00_stage1_initial/video_latent")));
    EXPECT_EQ(sha256_hex(rf.read_bf16(g + "/free_running/01_stage1_step1/audio_latent")),
              sha256_hex(rf.read_bf16(g + "/teacher_forced/01_stage1_step1/audio_latent")));
  }
  const auto cases = read_json(f, "/report/cases");
  // 2 contexts x (the paths x (free-running, teacher-forced), the recorded official states, the
  // float64 states rounded to BF16)
  EXPECT_EQ(cases.size(), 2 * (2 * replayed.size() + 2));
  expect_records_round_trip("one-token", cases);
  int runs = 0;
  for (auto& c : cases) {
    ASSERT_EQ(c["states_f64"].size(), 13u) << c["path"];
    if (c.contains("states")) {
      ++runs;
      EXPECT_EQ(c["states"].size(), 13u);
    }
    // Every path starts from the stage-1 noise, which the float64 run holds exactly.
    EXPECT_EQ(c["states_f64"][0]["video_differing"].get<long long>(), 0) << c["path"];
    EXPECT_EQ(c["states_f64"][0]["video_rel_l2"].get<double>(), 0.0) << c["path"];
    const auto& last = c["states_f64"][12];
    if (c["path"] == "float64 rounded to BF16") {
      EXPECT_EQ(last["video_differing"].get<long long>(), 0);
      EXPECT_GT(last["video_rel_l2"].get<double>(), 0.0);
    } else {
      EXPECT_GT(last["video_differing"].get<long long>(), 0) << c["path"] << " " << c["mode"];
    }
  }
  EXPECT_EQ(runs, int(2 * 2 * replayed.size()));
  expect_table_iii(cases, read_json(f, "/report/tables")[0]);
  // The float64 states are kept in float64.
  EXPECT_EQ(rf.read_f64("/states/one-token/float64/teacher_forced/12_stage2_step3/video_latent").shape,
            (psi::Shape{1, 288, 128}));
  CmdResult rep = psi_cmd("report " + f.string() + " --format csv");
  EXPECT_EQ(rep.status, 0);
  EXPECT_NE(rep.out.find("path,mode,"), std::string::npos) << rep.out;
  EXPECT_NE(rep.out.find("final rel L2 to float64 (video / audio)"), std::string::npos) << rep.out;
  EXPECT_NE(rep.out.find("official MATH (recorded),free-running,"), std::string::npos) << rep.out;
  // The one-token context's tables come before the 1,024-row context's, as the run replays them.
  const std::size_t first_one = rep.out.find(" one-token context"), first_ctx = rep.out.find(" ctx1024 context");
  ASSERT_NE(first_one, std::string::npos) << rep.out;
  ASSERT_NE(first_ctx, std::string::npos) << rep.out;
  EXPECT_LT(first_one, first_ctx) << rep.out;
  EXPECT_LT(rep.out.rfind(" one-token context"), first_ctx) << rep.out;
  EXPECT_EQ(psi_cmd("report " + f.string() + " --format yaml").status, 2);
}

// full-prompt --quick: one case through the four paths; the dense path's endpoint distance to
// itself is exactly 0; the figures are written next to the report.
TEST_F(Experiments, FullPromptQuickWithFigures) {
  const fs::path f = dir_ / "fp.h5";
  CmdResult r = psi_cmd("run full-prompt --quick --out " + f.string());
  ASSERT_EQ(r.status, 0) << r.out;
  expect_report_structure(f, "full-prompt");
  const auto cases = read_json(f, "/report/cases");
  ASSERT_EQ(cases.size(), 1u);
  expect_records_round_trip("full-prompt", cases);
  EXPECT_EQ(cases[0]["paths"]["dense"]["endpoint_video_rel_l2"].get<double>(), 0.0);
  EXPECT_GT(cases[0]["paths"]["baseline"]["endpoint_video_rel_l2"].get<double>(), 0.0);
  EXPECT_GT(cases[0]["paths"]["official-h200"]["endpoint_video_rel_l2"].get<double>(), 0.0);
  // Against the paper's reference, official-h200 is exactly 0 and the PSI paths are not.
  EXPECT_EQ(cases[0]["paths"]["official-h200"]["official_video_rel_l2"].get<double>(), 0.0);
  EXPECT_GT(cases[0]["paths"]["baseline"]["official_video_rel_l2"].get<double>(), 0.0);
  expect_table_ii(cases, read_json(f, "/report/tables"));
  // psi report --format csv gives the table whole, its summary and paper lines too.
  const CmdResult csv = psi_cmd("report " + f.string() + " --format csv");
  EXPECT_NE(csv.out.find("\n# modified beats baseline (a lower endpoint relative L2 to official-h200): video "),
            std::string::npos) << csv.out;
  EXPECT_NE(csv.out.find("\n# paper (Table II and its text"), std::string::npos) << csv.out;
  EXPECT_TRUE(fs::exists(dir_ / "fp.endpoint_error.svg"));
  EXPECT_NE(r.out.find("Δ video"), std::string::npos);
  // Against official-h200 (the paper's reference, as the table) every other path is drawn, dense
  // too, and Δ on a linear axis of its own (on the errors' log axis it does not show), with the
  // value the records give.
  std::ifstream err_svg(dir_ / "fp.endpoint_error.svg"), delta_svg(dir_ / "fp.endpoint_delta.svg");
  const std::string errors((std::istreambuf_iterator<char>(err_svg)), {}), delta((std::istreambuf_iterator<char>(delta_svg)), {});
  EXPECT_NE(errors.find("Endpoint error to official-h200"), std::string::npos) << errors;
  EXPECT_NE(errors.find("<title>dense "), std::string::npos) << errors;
  EXPECT_EQ(errors.find("<title>official-h200 "), std::string::npos) << errors;
  char d[32];
  std::snprintf(d, sizeof d, "%.3g", cases[0]["paths"]["modified"]["official_video_rel_l2"].get<double>() -
                                         cases[0]["paths"]["baseline"]["official_video_rel_l2"].get<double>());
  EXPECT_NE(delta.find("modified − baseline " + cases[0]["prompt"].get<std::string>().substr(0, 5) + "#1 " + d +
                       "</title>"),
            std::string::npos) << delta;
}

// probes: three shards merged give the same saved tensors, bit for bit, as one run.
TEST_F(Experiments, ProbesShardedAndMergedEqualOneRun) {
  std::string shards;
  for (int i = 0; i < 3; ++i) {
    const fs::path s = dir_ / ("shard" + std::to_string(i) + ".h5");
    CmdResult r = psi_cmd("run probes --shard " + std::to_string(i) + "/3 --out " + s.string());
    ASSERT_EQ(r.status, 0) << r.out;
    shards += " " + s.string();
  }
  const fs::path merged = dir_ / "merged.h5", single = dir_ / "single.h5";
  ASSERT_EQ(psi_cmd("merge" + shards + " --out " + merged.string()).status, 0);
  ASSERT_EQ(psi_cmd("run probes --out " + single.string()).status, 0);
  expect_report_structure(merged, "probes");
  CmdResult c = psi_cmd("compare " + merged.string() + " " + single.string() + " --only '^/probes/'");
  EXPECT_EQ(c.status, 0) << c.out;
  EXPECT_EQ(read_json(merged, "/report/cases").size(), 3u);
  expect_records_round_trip("probes", read_json(merged, "/report/cases"));
  // A shard left out (its job failed) is named; one given twice too.
  const std::string first_two = shards.substr(0, shards.rfind(' '));
  CmdResult m2 = psi_cmd("merge" + first_two + " --out " + (dir_ / "m2.h5").string());
  EXPECT_EQ(m2.status, 2) << m2.out;
  EXPECT_NE(m2.out.find("shard 2/3 missing (2 of 3 given)"), std::string::npos) << m2.out;
  EXPECT_FALSE(fs::exists(dir_ / "m2.h5"));
  CmdResult twice = psi_cmd("merge" + first_two + first_two.substr(0, first_two.rfind(' ')) + " --out " +
                            (dir_ / "m3.h5").string());
  EXPECT_EQ(twice.status, 2) << twice.out;
  EXPECT_NE(twice.out.find("shard 0/3 given twice"), std::string::npos) << twice.out;
  EXPECT_FALSE(fs::exists(dir_ / "m3.h5"));
  EXPECT_EQ(psi_cmd("run one-token --shard 0/2 --out " + (dir_ / "s.h5").string()).status, 2);
}

// The probe rows count sign flips apart from the same-sign ULP maximum; a report written before
// (one "max_ulp" over every differing element) still tabulates, with neither number shown.
TEST(ProbeRecords, SignFlipsApartAndOlderReportsStillTabulate) {
  const auto cases = nlohmann::json::parse(R"([{"case": "audio-ff-up", "index": 0, "rows": [
      {"variant": "baseline", "tensor": "proj_out", "backend": "official", "rows": "all", "differing": 314841,
       "total": 1032192, "rel_l2": 2.7e-3, "sign_flips": 559, "max_ulp_same_sign": 128},
      {"variant": "dense", "tensor": "proj_out", "backend": "official", "rows": "all", "differing": 1129,
       "total": 1032192, "rel_l2": 9.6e-5, "max_ulp": 14833}]}])");
  const report::Table t = exp::find_experiment("probes").tabulate(cases, nlohmann::json::object())[0];
  ASSERT_EQ(t.rows.size(), 2u);
  const auto column = [&](const std::string& name) {
    return std::size_t(std::find(t.columns.begin(), t.columns.end(), name) - t.columns.begin());
  };
  ASSERT_LT(column("max ULP (same sign)"), t.columns.size());
  EXPECT_EQ(t.rows[0][column("sign flips")], "559");
  EXPECT_EQ(t.rows[0][column("max ULP (same sign)")], "128");
  EXPECT_EQ(t.rows[1][column("sign flips")], "—");
  EXPECT_EQ(t.rows[1][column("max ULP (same sign)")], "—");
}

// One relative L2 to the float64 block: psi probe --variant float64 prints, for the recorded
// MATH and FLASH blocks, the numbers block-controls' float64 table shows for them (the probe
// once measured the float64 block rounded to BF16 against the recording instead: other numbers
// under the same name).
TEST_F(Experiments, ProbeFloat64RowsAreBlockControlsFloat64Table) {
  const fs::path b = dir_ / "bc.h5";
  ASSERT_EQ(psi_cmd("run block-controls --out " + b.string()).status, 0);
  const CmdResult probe = psi_cmd("probe block-small --variant float64");
  ASSERT_EQ(probe.status, 0) << probe.out;
  nlohmann::json table;
  for (const auto& t : read_json(b, "/report/tables"))
    if (t["title"].get<std::string>().starts_with("distance to the float64 block")) table = t;
  ASSERT_TRUE(table.is_object());
  const auto& columns = table["columns"];
  const auto column = [&](const std::string& name) {
    return std::size_t(std::find(columns.begin(), columns.end(), name) - columns.begin());
  };
  int compared = 0;
  for (const auto& row : table["rows"]) {
    const std::string cell0 = row[0], tensor = cell0.substr(0, cell0.find(' '));
    for (const auto& [path, vs] : {std::pair<std::string, std::string>{"official MATH (recorded)", "math"},
                                   {"official FLASH (recorded)", "flash"}}) {
      ASSERT_LT(column(path), columns.size()) << path;
      std::string cell = row[column(path)];  // "3.428e-03 / 179,084"
      std::erase(cell, ',');
      const std::string l2 = cell.substr(0, cell.find(' ')), differing = cell.substr(cell.rfind(' ') + 1);
      // "float64 <tensor> <vs> all differs N/T rel_l2_to_float64 X ..."
      const std::regex line("\\nfloat64 +" + tensor + " +" + vs + " +all +differs " + differing +
                            "/\\d+ rel_l2_to_float64 " + l2 + " ");
      EXPECT_TRUE(std::regex_search(probe.out, line)) << tensor << " " << vs << ": block-controls " << cell << "\n"
                                                      << probe.out;
      ++compared;
    }
  }
  EXPECT_EQ(compared, 20);
}

// block-controls draws, beside its report, each nonzero differing cell of its main table (a path's
// video_out or audio_out against MATH): a map over tokens x channels and a ULP histogram, SVG
// and PNG. The case records what they draw: the histogram adds up to the cell's count, and the
// map's SVG keeps the same counts.
TEST_F(Experiments, BlockControlsDrawsEachDifferingCell) {
  const fs::path b = dir_ / "bc.h5";
  const CmdResult r = psi_cmd("run block-controls --out " + b.string());
  ASSERT_EQ(r.status, 0) << r.out;
  const auto bc = read_json(b, "/report/cases")[0];
  ASSERT_TRUE(bc.contains("ulp_figures"));
  const auto& figures = bc["ulp_figures"];
  const auto main = read_json(b, "/report/tables")[0];
  const auto& columns = main["columns"];
  std::size_t drawn = 0;
  for (const auto& row : main["rows"]) {
    for (const auto& output : {std::pair<std::string, std::string>{"video_out", "video differing"},
                               {"audio_out", "audio differing"}}) {
      const std::string& tensor = output.first;  // not a structured binding: the lambda below takes it
      const std::string& column = output.second;
      const auto at = std::find(columns.begin(), columns.end(), column);
      ASSERT_NE(at, columns.end()) << column;
      std::string cell = row[std::size_t(at - columns.begin())];  // "63,496 / 315,392"
      std::erase(cell, ',');
      const long long differing = std::stoll(cell);
      const std::string path = row[0];
      const auto fig = std::find_if(figures.begin(), figures.end(),
                                    [&](const auto& u) { return u["path"] == path && u["tensor"] == tensor; });
      if (differing == 0) {
        EXPECT_EQ(fig, figures.end()) << path << " " << tensor << ": equal, yet drawn";
        continue;
      }
      ASSERT_NE(fig, figures.end()) << path << " " << tensor << ": " << differing << " differ, not drawn";
      ++drawn;
      psi::DiffMap map;
      (*fig)["histogram"].get_to(map.histogram);
      (*fig)["cells"].get_to(map.cells);
      long long sum = 0;
      for (long long n : map.histogram) sum += n;
      const std::string figure = (*fig)["figure"];
      EXPECT_EQ(sum, differing) << figure;
      const std::string stem = (dir_ / ("bc." + figure)).string();
      for (const std::string kind : {".ulp-map", ".ulp-histogram"}) {
        EXPECT_NE(r.out.find("figure: " + stem + kind + ".svg\n"), std::string::npos) << stem + kind << "\n" << r.out;
        std::ifstream png(stem + kind + ".png", std::ios::binary);
        std::string magic(8, '\0');
        png.read(magic.data(), 8);
        EXPECT_EQ(magic, std::string("\x89PNG\r\n\x1a\n", 8)) << stem + kind;
      }
      std::ifstream svg(stem + ".ulp-map.svg");
      const std::string svg_text((std::istreambuf_iterator<char>(svg)), {});
      EXPECT_NE(svg_text.find(std::regex_replace(report::ulp_histogram_line(map), std::regex(">"), "&gt;")),
                std::string::npos)
          << figure;
    }
  }
  EXPECT_EQ(drawn, figures.size());
  EXPECT_GE(drawn, 8u);  // the recorded FLASH block and every psi path but official-h200 differ from MATH
}

// block-controls and projection-oracle: the recorded FLASH row equals the README's count, and
// the first disagreeing Q element has a psi value that differs from the official one.
TEST_F(Experiments, BlockControlsAndProjectionOracle) {
  const fs::path b = dir_ / "bc.h5", p = dir_ / "po.h5";
  CmdResult rb = psi_cmd("run block-controls --out " + b.string());
  ASSERT_EQ(rb.status, 0) << rb.out;
  expect_report_structure(b, "block-controls");
  // The recorded small block ran: the report says so, not the default model tiny.
  EXPECT_EQ(hdf5::StateReader(b).run_info().model_config, "small/ltx25");
  expect_records_round_trip("block-controls", read_json(b, "/report/cases"));
  const auto bc = read_json(b, "/report/cases")[0];
  for (auto& row : bc["official_flash_vs_math"]) {
    if (row["tensor"] == "video_out") {
      EXPECT_EQ(row["differing"].get<long long>(), 63496);
    }
  }
  EXPECT_NE(rb.out.find("| psi official-h200 "), std::string::npos) << rb.out;
  // The official projections' arithmetic brings the block closer to the official MATH block.
  std::map<std::string, long long> video_out;
  for (auto& row : bc["rows"])
    if (row["tensor"] == "video_out" && row["backend"] == "math") video_out[row["variant"]] = row["differing"];
  ASSERT_TRUE(video_out.count("dense") && video_out.count("official-h200"));
  EXPECT_LT(10 * video_out["official-h200"], video_out["dense"]);
  // official-h200-flash reproduces the recorded FLASH block: against MATH it differs exactly
  // where FLASH does.
  ASSERT_TRUE(video_out.count("official-h200-flash"));
  EXPECT_EQ(video_out["official-h200-flash"], 63496);
  // The second table: every path's distance to the float64 block, ten probes x seven paths.
  EXPECT_NE(rb.out.find("distance to the float64 block"), std::string::npos) << rb.out;
  ASSERT_EQ(bc["float64_rows"].size(), 70u);
  for (auto& row : bc["float64_rows"]) {
    EXPECT_GT(row["rel_l2"].get<double>(), 0.0) << row.dump();
    EXPECT_LT(row["rel_l2"].get<double>(), 1e-2) << row.dump();  // the BF16 paths' error, test_block_f64.cpp
  }
  // The third: every element where the recorded FLASH and MATH blocks differ has one cause, so
  // each probe's causes add up to its differing count (video_out: the FLASH row's 63,496);
  // psi reproduces both ends everywhere, and the P-to-BF16 step and the key split both matter.
  ASSERT_EQ(bc["flash_causes"].size(), 10u);
  for (auto& c : bc["flash_causes"]) {
    long long sum = c["not_reproduced"].get<long long>();
    for (auto& n : c["by_step"]) sum += n.get<long long>();
    EXPECT_EQ(sum, c["differing"].get<long long>()) << c.dump();
    EXPECT_EQ(c["not_reproduced"].get<long long>(), 0) << c.dump();
    ASSERT_EQ(c["by_step"].size(), 7u);
    EXPECT_GT(c["by_step"][4].get<long long>(), 0) << c.dump();
    if (c["tensor"] == "video_out") {
      EXPECT_EQ(c["differing"].get<long long>(), 63496);
      EXPECT_GT(c["by_step"][6].get<long long>(), 0) << c.dump();
    }
  }
  EXPECT_EQ(read_json(b, "/report/tables").size(), 3u);
  expect_table_vi(bc, read_json(b, "/report/tables")[0]);
  CmdResult rp = psi_cmd("run projection-oracle --out " + p.string());
  ASSERT_EQ(rp.status, 0) << rp.out;
  // The exact value's cell keeps its exponent (it once lost it: "5.201001185923" for 5.2e-04).
  EXPECT_NE(rp.out.find("| ~5.20100118592e-04 "), std::string::npos) << rp.out;
  expect_report_structure(p, "projection-oracle");
  expect_records_round_trip("projection-oracle", read_json(p, "/report/cases"));
  const auto po = read_json(p, "/report/cases")[0];
  ASSERT_TRUE(po.contains("explanation"));
  const auto& cands = po["explanation"]["candidates"];
  ASSERT_EQ(cands.size(), 2u);
  EXPECT_NE(cands[0]["bits"], cands[1]["bits"]);
}

// scheduling --quick: every run of every schedule gives the same ten probes, equal to the host
// block's; reuse moves fewer weight bytes than recompute; the async journal blocks less.
TEST_F(Experiments, SchedulingBitwiseAcrossSchedules) {
  const fs::path f = dir_ / "sched.h5";
  CmdResult r = psi_cmd("run scheduling --quick --out " + f.string());
  ASSERT_EQ(r.status, 0) << r.out;
  expect_report_structure(f, "scheduling");
  const auto cases = read_json(f, "/report/cases");
  ASSERT_EQ(cases.size(), 12u);  // (1 warm-up + 2 cycles) x 4 schedules
  expect_records_round_trip("scheduling", cases);
  std::map<std::string, nlohmann::json> run_of;
  for (auto& c : cases) {
    ASSERT_EQ(c["outcome"], "complete") << c.dump();
    EXPECT_EQ(c["probes_equal_host"], 10) << c["schedule"];
    EXPECT_EQ(c["probe_sha256"], cases[0]["probe_sha256"]) << c["schedule"];
    EXPECT_LE(c["run"]["managed_peak_bytes"].get<long long>(), c["run"]["bound_bytes"].get<long long>());
    EXPECT_EQ(c["run"]["device_allocations"], 1);
    run_of[c["schedule"]] = c["run"];
  }
  EXPECT_LT(run_of["ffn-reuse"]["h2d_bytes"]["weights"].get<long long>(),
            run_of["baseline"]["h2d_bytes"]["weights"].get<long long>());
  EXPECT_LT(run_of["reuse+async-journal"]["blocking_syncs"].get<long long>(),
            run_of["ffn-reuse"]["blocking_syncs"].get<long long>());

  // The same cases as a GPU run records them (host-resident weights, no host-block check): the
  // table adds the block's own time and keeps the across-runs bitwise verdict; one changed
  // probe hash turns it to NO.
  nlohmann::json gpu = cases;
  for (auto& c : gpu) {
    c.erase("probes_equal_host");
    c["weights"] = "host-resident";
    c["block_s"] = 0.004;
  }
  const report::Table t = exp::find_experiment("scheduling").tabulate(gpu, {{"model", "tiny"}})[0];
  ASSERT_EQ(t.columns.at(2), "block (ms, mean ± SD)");
  ASSERT_EQ(t.rows.size(), 4u);
  for (const auto& row : t.rows) {
    EXPECT_EQ(row.at(2), "4.0 ± 0.0") << row.at(0);
    EXPECT_EQ(row.back().substr(0, 3), "yes") << row.at(0);
  }
  gpu[5]["probe_sha256"]["video_out"] = "0";
  int no = 0;
  const report::Table changed = exp::find_experiment("scheduling").tabulate(gpu, {{"model", "tiny"}})[0];
  for (const auto& row : changed.rows) no += row.back() == "NO";
  EXPECT_EQ(no, 1);
}

// --row-tile fit: the largest row tile that fits the arena, fewer weight bytes streamed, the same
// ten probes as the host block; --row-tile is refused elsewhere and for non-positive values.
TEST_F(Experiments, SchedulingAtTheFittingRowTile) {
  const fs::path f = dir_ / "sched-fit.h5";
  CmdResult r = psi_cmd("run scheduling --quick --row-tile fit --out " + f.string());
  ASSERT_EQ(r.status, 0) << r.out;
  const auto cases = read_json(f, "/report/cases");
  ASSERT_EQ(cases.size(), 12u);
  for (auto& c : cases) {
    EXPECT_GT(c["row_tile"].get<long long>(), 64) << c["schedule"];  // tiny's default is 64 rows
    EXPECT_EQ(c["probes_equal_host"], 10) << c["schedule"];
  }
  EXPECT_NE(r.out.find(", row tile " + std::to_string(cases[0]["row_tile"].get<long long>())), std::string::npos);
  r = psi_cmd("run capacity --row-tile fit --out " + (dir_ / "cap.h5").string());
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.out.find("psi: error: --row-tile applies only to scheduling (not capacity)"), std::string::npos) << r.out;
  r = psi_cmd("run scheduling --row-tile 0 --out " + (dir_ / "x.h5").string());
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.out.find("psi: error: --row-tile '0': expected a positive number of rows or 'fit'"), std::string::npos)
      << r.out;
  r = psi_cmd("run scheduling --quick --row-tile 1000000000 --out " + (dir_ / "x.h5").string());
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.out.find("psi: error: --row-tile 1000000000: more rows than the block's tallest stream has ("),
            std::string::npos)
      << r.out;
  // Only the row-tile granule's multiples, written in decimal (one integer parser).
  r = psi_cmd("run scheduling --row-tile 40 --out " + (dir_ / "x.h5").string());
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.out.find("psi: error: --row-tile 40: not a multiple of 16 rows"), std::string::npos) << r.out;
  for (const char* bad : {"+32", "0x20", "32.0", " 32", "-16", "99999999999999999999"}) {
    r = psi_cmd(std::string("run scheduling --row-tile '") + bad + "' --out " + (dir_ / "x.h5").string());
    EXPECT_EQ(r.status, 2) << bad;
    EXPECT_NE(r.out.find("expected a positive number of rows or 'fit'"), std::string::npos) << bad << r.out;
  }
  EXPECT_FALSE(fs::exists(dir_ / "x.h5"));
}

// capacity: the 4 MiB-page setting (scaled) cannot hold an FFN tile; every completed setting is
// bitwise equal to the reference; memory-scopes reports its scopes within the bound.
TEST_F(Experiments, CapacityOutcomesAndMemoryScopes) {
  const fs::path f = dir_ / "cap.h5";
  CmdResult r = psi_cmd("run capacity --out " + f.string());
  ASSERT_EQ(r.status, 0) << r.out;
  expect_report_structure(f, "capacity");
  const auto cases = read_json(f, "/report/cases");
  ASSERT_EQ(cases.size(), 6u);
  expect_records_round_trip("capacity", cases);
  EXPECT_EQ(read_json(f, "/report/tables")[0]["time_columns"], nlohmann::json({"wall (ms)"}));
  int complete = 0;
  for (auto& c : cases) {
    if (c["page_bytes"].get<long long>() * 2 == cases[0]["page_bytes"].get<long long>()) {
      EXPECT_EQ(c["outcome"], "tile_exceeds_page") << c["setting"];
    }
    if (c["outcome"] == "complete") {
      ++complete;
      EXPECT_TRUE(c["bitwise_equal_to_reference"].get<bool>()) << c["setting"];
    } else {
      EXPECT_FALSE(c["failure"].get<std::string>().empty());
    }
  }
  EXPECT_GE(complete, 1);
  expect_table_v(cases, read_json(f, "/report/tables")[0]);
  // The smallest arena the table gives at its pages is the edge: the block completes there and
  // exhausts scratch one alignment unit below.
  {
    const exp::Options o;  // capacity's defaults: tiny, seed 0, the CPU backend
    const exp::FirstBlock fb = exp::first_block(o);
    exec::ArenaSettings a = exec::default_arena(fb.config);
    const std::uint64_t edge = 2 * std::uint64_t(a.page) + std::uint64_t(a.workspace) +
                               cases[0]["scratch_need_bytes"].get<std::uint64_t>();
    exec::ExecOptions eo;
    eo.backend = "cpu";
    for (const std::uint64_t arena : {edge, edge - rt::kAlignment}) {
      a.arena = std::int64_t(arena);
      const exec::BlockRun run = exec::run_block(fb.config, *fb.weights, 0, fb.inputs,
                                                 exp::variant_of(o, exp::kRuntimeVariant),
                                                 exec::schedule("reuse+prefetch"), a, eo);
      EXPECT_EQ(rt::outcome_name(run.outcome), arena == edge ? "complete" : "scratch_exhausted")
          << arena << ": " << run.failure;
    }
  }
  const fs::path m = dir_ / "ms.h5";
  CmdResult rm = psi_cmd("run memory-scopes --out " + m.string());
  ASSERT_EQ(rm.status, 0) << rm.out;
  expect_report_structure(m, "memory-scopes");
  const auto ms = read_json(m, "/report/cases");
  ASSERT_EQ(ms.size(), 2u);
  expect_records_round_trip("memory-scopes", ms);
  EXPECT_EQ(ms[0]["result"]["outcome"], "complete");
  EXPECT_LE(ms[0]["run"]["managed_peak_bytes"].get<long long>(), ms[0]["run"]["bound_bytes"].get<long long>());
  EXPECT_TRUE(fs::exists(dir_ / "ms.memory_scopes.svg"));
  // The process peak beside the managed peak (issue 43.5), a bar per stage.
  std::ifstream fig(dir_ / "ms.memory_scopes.svg");
  const std::string svg((std::istreambuf_iterator<char>(fig)), std::istreambuf_iterator<char>());
  EXPECT_NE(svg.find(">process peak (host VmHWM (CPU backend))</text>"), std::string::npos) << svg;
  EXPECT_NE(svg.find("<title>process peak (host VmHWM (CPU backend)) stage 2 "), std::string::npos) << svg;
}

// transport-control --quick under chaos: the synchronous journal and the asynchronous journal
// with prefetch give all 26 saved states bitwise equal to the same run on the host block (no
// executor, a file of its own: no schedule is compared with itself), for several chaos seeds;
// the state files compare equal with psi compare too.
TEST_F(Experiments, TransportControlUnderChaos) {
  for (int seed : {0, 11, 29}) {
    const fs::path f = dir_ / ("tc" + std::to_string(seed) + ".h5");
    CmdResult r = psi_cmd("run transport-control --quick --out " + f.string() + (seed ? " --chaos " + std::to_string(seed) : ""));
    ASSERT_EQ(r.status, 0) << r.out;
    expect_report_structure(f, "transport-control");
    const auto cases = read_json(f, "/report/cases");
    ASSERT_EQ(cases.size(), 2u);
    expect_records_round_trip("transport-control", cases);
    const fs::path host = dir_ / ("tc" + std::to_string(seed) + ".host.h5");
    for (auto& c : cases) {
      EXPECT_EQ(c["compared_to"], host.string()) << c["schedule"];
      EXPECT_EQ(c["compare_exit"], 0) << c["schedule"];
      EXPECT_EQ(c["datasets_equal"], 26) << c["schedule"];
      EXPECT_EQ(c["datasets_compared"], 26) << c["schedule"];
    }
    EXPECT_EQ(hdf5::StateReader(host).run_info().experiment, "transport-control/host");
    EXPECT_EQ(r.out.find("(the reference)"), std::string::npos) << r.out;
    for (auto& c : cases) {
      CmdResult cmp = psi_cmd("compare " + c["file"].get<std::string>() + " " + host.string());
      EXPECT_EQ(cmp.status, 0) << cmp.out;
    }
    // The side files are tied to the report that compared them.
    const auto run_id = hdf5::File::open_read(f).attr("/", "run_id");
    ASSERT_TRUE(run_id.has_value());
    for (auto& c : cases) EXPECT_EQ(hdf5::File::open_read(c["file"].get<std::string>()).attr("/", "run_id"), run_id);
    EXPECT_EQ(hdf5::File::open_read(host).attr("/", "run_id"), run_id);
  }
  // The same run written under another name compares equal: the state files' names (compared_to,
  // the table's reference line) are provenance, shown and not counted.
  const fs::path again = dir_ / "elsewhere.h5";
  ASSERT_EQ(psi_cmd("run transport-control --quick --out " + again.string()).status, 0);
  const CmdResult cmp = psi_cmd("compare " + again.string() + " " + (dir_ / "tc0.h5").string());
  EXPECT_EQ(cmp.status, 0) << cmp.out;
  EXPECT_NE(cmp.out.find("paths of inputs differ, not counted (provenance: [0].compared_to: A=\"" +
                         (dir_ / "elsewhere.host.h5").string() + "\""),
            std::string::npos)
      << cmp.out;
}

// A report's run compared with its own file (CUDA's reference run; the first schedule of reports
// before the host reference) shows as the reference, never as "26 / 26 (equal)"; the note says
// what the reference was.
TEST(TransportControlTable, NoRowComparesARunWithItself) {
  nlohmann::json run = {{"h2d_bytes", {{"weights", 0}, {"journal", 0}}}, {"d2h_bytes", {{"journal", 0}}},
                        {"blocking_syncs", 0}, {"managed_peak_bytes", 0}, {"bound_bytes", 0}};
  const auto row = [&](const std::string& schedule, const std::string& compared_to) {
    return nlohmann::json{{"schedule", schedule}, {"file", "r." + schedule + ".h5"}, {"wall_mean_s", 0},
                          {"wall_sd_s", 0}, {"run", run}, {"compared_to", compared_to}, {"datasets_compared", 26},
                          {"datasets_equal", 26}, {"compare_exit", 0}};
  };
  const report::Table old = exp::find_experiment("transport-control").tabulate(
      nlohmann::json::array({row("baseline", "r.baseline.h5"), row("ffn-reuse", "r.baseline.h5")}),
      {{"model", "tiny"}})[0];
  EXPECT_EQ(old.rows[0][1], "— (the reference)");
  EXPECT_EQ(old.rows[1][1], "26 / 26 (equal)");
  EXPECT_NE(old.notes[0].find("the first schedule's run"), std::string::npos) << old.notes[0];
}

// A side file read back by name that another run has replaced (same --out) is refused, not
// compared: its run_id is not this run's.
TEST_F(Experiments, ReplacedSideFilesAreRefused) {
  exp::Options o;
  o.out = (dir_ / "r.h5").string();
  const exp::Report mine(exp::find_experiment("transport-control"), o, "cpu", {});
  const exp::Report other(exp::find_experiment("transport-control"), o, "cpu", {});
  EXPECT_NE(mine.run_id(), other.run_id());
  const fs::path side = mine.side_file(".sync.h5");
  {
    hdf5::StateWriter w(side, hdf5::RunInfo{});
    other.stamp_side_file(w);
    w.commit();
  }
  try {
    mine.check_side_file(side);
    ADD_FAILURE() << "another run's side file was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Exit::run_failed);
    EXPECT_EQ(std::string(e.what()), side.string() + " was replaced by another run while this one ran (its run_id is " +
                                         other.run_id() + ", this run's " + mine.run_id() +
                                         "); two runs must not share --out");
  }
  {
    hdf5::StateWriter w(side, hdf5::RunInfo{});
    mine.stamp_side_file(w);
    w.commit();
  }
  EXPECT_NO_THROW(mine.check_side_file(side));
}

// fixed-budget: the capped PSI run fits its cap and reproduces the uncapped host run bit for bit.
TEST_F(Experiments, FixedBudgetBitwiseToUncapped) {
  const fs::path f = dir_ / "fb.h5";
  CmdResult r = psi_cmd("run fixed-budget --out " + f.string());
  ASSERT_EQ(r.status, 0) << r.out;
  expect_report_structure(f, "fixed-budget");
  expect_records_round_trip("fixed-budget", read_json(f, "/report/cases"));
  const auto c = read_json(f, "/report/cases")[0];
  EXPECT_TRUE(c["fits"].get<bool>());
  EXPECT_LE(c["held_bytes"].get<long long>(), c["cap_bytes"].get<long long>());
  EXPECT_EQ(c["states_equal"], c["states_total"]);
  EXPECT_EQ(c["states_total"], 26);
  EXPECT_TRUE(has_note(read_json(f, "/report/tables")[0], "paper (Table VII, LTX-2 22B: a complete 8+3 run under a "
                                                          "fixed cap"));
  CmdResult cmp = psi_cmd("compare " + f.string() + " " + f.string() + " --map /states/capped=/states/uncapped --only '^/states/capped'");
  EXPECT_EQ(cmp.status, 0) << cmp.out;
}

// fixed-budget --pool: on the CPU backend it sets the cap (scaled like the arena: tiny is 1/16 of
// ltx2-22b), which the run is held under, and the reservation and the GPU memory say they do not
// apply rather than show numbers.
TEST_F(Experiments, FixedBudgetPoolOnTheCpuBackend) {
  const fs::path f = dir_ / "fb.h5";
  CmdResult r = psi_cmd("run fixed-budget --backend cpu --pool 1GiB --out " + f.string());
  ASSERT_EQ(r.status, 0) << r.out;
  const auto c = read_json(f, "/report/cases")[0];
  EXPECT_EQ(c["cap_bytes"], 64 << 20);
  EXPECT_TRUE(c["fits"].get<bool>());
  EXPECT_EQ(read_json(f, "/report/options")["pool_bytes"], 1 << 30);
  const auto& run = c["run"];
  EXPECT_EQ(run["reservation"]["made"], false);
  EXPECT_EQ(run["reservation"]["status"], "not applicable on the cpu backend: it has no device memory to reserve");
  EXPECT_TRUE(run["reservation"]["pool_after_bytes"].is_null());
  EXPECT_EQ(run["gpu_memory"]["applicable"], false);
  EXPECT_TRUE(run["gpu_memory"]["process_peak_bytes"].is_null());
  EXPECT_NE(r.out.find("| not applicable (cpu backend) |"), std::string::npos) << r.out;

  EXPECT_NE(r.out.find("| 1024.0 MiB (64.0 MiB scaled to model tiny) | yes "), std::string::npos) << r.out;

  // A pool the run cannot fit in: a typed failure (exit 3) before anything else runs, naming the
  // pool as given, the cap it scales to and what would pass it; no report.
  const fs::path small = dir_ / "fb-small.h5";
  CmdResult tight = psi_cmd("run fixed-budget --backend cpu --pool 4MiB --out " + small.string());
  EXPECT_EQ(tight.status, 3) << tight.out;
  EXPECT_NE(tight.out.find("psi: error: fixed-budget --pool 4.0 MiB (0.2 MiB scaled to model tiny): the run does "
                           "not fit: the arena ("),
            std::string::npos)
      << tight.out;
  EXPECT_NE(tight.out.find("over the fixed budget's cap of"), std::string::npos) << tight.out;
  EXPECT_FALSE(fs::exists(small));

  CmdResult other = psi_cmd("run capacity --pool 1GiB --out " + (dir_ / "cap.h5").string());
  EXPECT_EQ(other.status, 2);
  EXPECT_NE(other.out.find("psi: error: --pool applies only to fixed-budget (not capacity)"), std::string::npos) << other.out;
  CmdResult bad = psi_cmd("run fixed-budget --pool 3G --out " + (dir_ / "bad.h5").string());
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.out.find("psi: error: --pool '3G': unknown unit 'G'"), std::string::npos) << bad.out;
  EXPECT_FALSE(fs::exists(dir_ / "bad.h5"));
}

// Which data (issue 27.6): the tables of the experiments on recordings name the recording they
// read, folder and seed, so that tables made from two recording sets cannot pass for each other.
TEST_F(Experiments, TablesNameTheRecordingFolderAndSeed) {
  const fs::path shared = psi::test::reference_dir(), other = dir_ / "another_reference";
  fs::create_directories(other);
  for (const char* f : {"probes_linear.h5", "probe_attn_traj.h5", "block_small.h5"})
    fs::create_symlink(shared / f, other / f);
  const std::vector<std::pair<std::string, std::string>> runs = {{"projection-oracle", "probes_linear.h5"},
                                                                 {"probes", "probe_attn_traj.h5"},
                                                                 {"block-controls", "block_small.h5"}};
  for (const auto& [experiment, file] : runs) {
    for (const fs::path& folder : {shared, other}) {
      if (experiment != "projection-oracle" && folder == shared) continue;  // one folder is enough for the slower two
      const fs::path out = dir_ / (experiment + "." + folder.filename().string() + ".h5");
      CmdResult r = psi_cmd("run " + experiment + " --reference " + folder.string() + " --out " + out.string());
      ASSERT_EQ(r.status, 0) << r.out;
      // The note names the recording wherever it lies; the provenance line, where it lay.
      EXPECT_NE(r.out.find(" recorded in: " + std::string(file) + " (SynthInit seed 0)"), std::string::npos)
          << experiment << " with " << folder << ":\n"
          << r.out;
      EXPECT_NE(r.out.find(" recorded in: " + (folder / file).string() + "\n"), std::string::npos)
          << experiment << " with " << folder << ":\n"
          << r.out;
    }
  }
}

// A failed bitwise claim of a run says where (issue 43.3): transport-control and fixed-budget
// print, under the failure, which latents differ and the first differing elements of the first.
TEST(RunFailures, StateDifferencesSayWhere) {
  auto state = [](const std::string& name) {
    pipeline::SavedState s;
    s.name = name;
    s.video = Bf16Tensor({2, 3}, std::vector<Bf16>(6, Bf16::from_bits(0x3f80)));
    s.audio = Bf16Tensor({1, 4}, std::vector<Bf16>(4, Bf16::from_bits(0x3f80)));
    return s;
  };
  std::vector<pipeline::SavedState> ref{state("00_a"), state("01_b")}, ours = ref;
  EXPECT_TRUE(exp::state_difference_lines(ours, ref, "psi", "ref").empty());
  ours[1].audio.data[2] = Bf16::from_bits(0x3f82);  // 1.015625 against 1: 2 ULPs
  ours[1].video.data[5] = Bf16::from_bits(0xbf80);  // -1 against 1: a sign flip
  const auto lines = exp::state_difference_lines(ours, ref, "psi", "ref");
  ASSERT_EQ(lines.size(), 3u) << ::testing::PrintToString(lines);
  EXPECT_EQ(lines[0], "2 of 4 latents differ: 01_b/video_latent, 01_b/audio_latent");
  EXPECT_EQ(lines[1], "01_b/video_latent: the first 1 of 1 differing elements, by index in the [2, 3] tensor");
  EXPECT_EQ(lines[2], "  [1, 2] (flat 5): psi 0xbf80 (-1) ref 0x3f80 (1), sign flip");
  ours[1].video = ref[1].video;
  EXPECT_EQ(exp::state_difference_lines(ours, ref, "psi", "ref").back(),
            "  [0, 2] (flat 2): psi 0x3f82 (1.015625) ref 0x3f80 (1), 2 ulps");
}

// psi report reads an interrupted run's <report>.partial.h5 (issue 43.7): it holds the finished
// cases and the options but no tables, so psi report tabulates the stored cases with the run's
// experiment, each title marked PARTIAL; the rows are those of the cases it holds.
TEST_F(Experiments, ReportReadsAPartialReport) {
  const fs::path whole = dir_ / "cap.h5";
  ASSERT_EQ(psi_cmd("run capacity --out " + whole.string()).status, 0);
  const auto cases = read_json(whole, "/report/cases");
  const auto options = read_json(whole, "/report/options");
  ASSERT_GE(cases.size(), 4u);
  exp::Options o = exp::Options::from_json(options);
  o.out = dir_ / "p.h5";
  const exp::Experiment& e = exp::find_experiment("capacity");
  fs::path partial;
  nlohmann::json finished = nlohmann::json::array();
  {
    exp::Report report(e, o, "test device", {});
    for (std::size_t i = 0; i < 3; ++i) {
      report.add_case(exp::case_index(cases[i]), cases[i]);
      finished.push_back(cases[i]);
    }
    partial = report.partial_path();
    report.abandon(partial);
  }
  ASSERT_TRUE(fs::exists(partial));
  CmdResult r = psi_cmd("report " + partial.string());
  ASSERT_EQ(r.status, 0) << r.out;
  std::vector<report::Table> expected = e.tabulate(finished, options);
  ASSERT_FALSE(expected.empty());
  for (report::Table& t : expected) {
    t.title += " [PARTIAL: 3 cases finished before the run was interrupted]";
    t.notes.push_back("partial report (" + psi::hdf5::partial_marker(hdf5::File::open_read(partial)) +
                      "): the cases the interrupted run had not finished are missing");
  }
  EXPECT_EQ(r.out, report::render(expected, report::Format::markdown));
  // Fewer rows than the whole run's tables.
  EXPECT_NE(r.out, psi_cmd("report " + whole.string()).out);
  EXPECT_EQ(psi_cmd("report " + partial.string() + " --format csv").status, 0);
}
