// The device check's summary (device_check/summary.h, `psi device summary`): ceilings
// parsing, the copy rate the transfer floor uses, the block's weight bytes, the scheduling
// aggregation (probes bitwise across runs), the NVML process peak, GoogleTest results, and the
// command on a check folder made by the CPU backend at tiny size.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "device_check/summary.h"
#include "engine/error.h"
#include "engine/model/config.h"
#include "experiments/scheduling.h"
#include "report/stats.h"
#include "report/table.h"

namespace fs = std::filesystem;
namespace dev = psi::device_check;

namespace {

int run(const std::string& args, std::string* out) {
  const std::string cmd = std::string(PSI_BINARY) + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return -1;
  char buf[4096];
  std::size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out->append(buf, n);
  const int st = pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

void write(const fs::path& p, const std::string& text) {
  std::ofstream o(p, std::ios::binary);
  o << text;
}

// The trimmed cells of the Markdown table row whose first cell is `first` (empty: no such row).
std::vector<std::string> row_cells(const std::string& md, const std::string& first) {
  std::istringstream in(md);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("|", 0) != 0) continue;
    std::vector<std::string> cells;
    std::string cell;
    std::istringstream ls(line.substr(1));
    while (std::getline(ls, cell, '|')) {
      const auto a = cell.find_first_not_of(' '), b = cell.find_last_not_of(' ');
      cells.push_back(a == std::string::npos ? "" : cell.substr(a, b - a + 1));
    }
    if (!cells.empty() && cells[0] == first) return cells;
  }
  return {};
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// One scheduling case as experiments/scheduling.cpp records it.
nlohmann::json sched_case(const std::string& schedule, int cycle, const std::string& outcome, double wall,
                          const std::string& sha_of_probe3 = "c") {
  nlohmann::json c{{"schedule", schedule}, {"cycle", cycle},       {"warmup", cycle == 0},
                   {"arena", "80 MiB / 8 MiB"}, {"outcome", outcome}, {"wall_s", wall},
                   {"inputs", "block 0"},       {"run", nullptr}};  // a record as the driver writes it
  if (outcome == "complete") {
    nlohmann::json h;
    for (int i = 0; i < 10; ++i) h["p" + std::to_string(i)] = i == 3 ? sha_of_probe3 : "h" + std::to_string(i);
    c["probe_sha256"] = h;
    c["probes_equal_host"] = sha_of_probe3 == "c" ? 10 : 9;
    c["run"] = {{"page_bytes", 8 << 20}, {"h2d_bytes", {{"weights", 1000}}}};
  }
  return c;
}

}  // namespace

TEST(DeviceSummary, ParsesCeilingLinesAndSkipsOtherKinds) {
  const std::string text =
      "{\"kind\": \"copy\", \"MiB\": 8, \"h2d_GBps\": 52.168, \"d2h_GBps\": 53.023, \"bidir_each_GBps\": 40.7}\n"
      "{\"kind\": \"d2d\", \"GiB\": 4, \"rw_TBps\": 4.251}\n"
      "\n"
      "{\"kind\": \"gemm\", \"m\": 4928, \"n\": 4096, \"k\": 4096, \"ms\": 0.233, \"TFLOPs\": 710.977}\n";
  const dev::Ceilings c = dev::parse_ceilings(text, "c.jsonl");
  ASSERT_EQ(c.copies.size(), 1u);
  EXPECT_EQ(c.copies[0].mib, 8);
  EXPECT_EQ(c.copies[0].h2d_gbps, 52.168);
  EXPECT_EQ(c.copies[0].d2h_gbps, 53.023);
  ASSERT_EQ(c.gemms.size(), 1u);
  EXPECT_EQ(c.gemms[0].m, 4928);
  EXPECT_EQ(c.gemms[0].tflops, 710.977);
}

TEST(DeviceSummary, MalformedCeilingLineNamesSourceAndLine) {
  try {
    dev::parse_ceilings("{\"kind\": \"copy\", \"MiB\": 8, \"h2d_GBps\": 1, \"d2h_GBps\": 1}\nnot json\n", "c.jsonl");
    FAIL() << "no error";
  } catch (const psi::Error& e) {
    EXPECT_NE(std::string(e.what()).find("c.jsonl:2"), std::string::npos) << e.what();
  }
  EXPECT_THROW(dev::parse_ceilings("{\"kind\": \"copy\", \"MiB\": 8}\n", "c.jsonl"), psi::Error);
}

TEST(DeviceSummary, FloorUsesTheCopyNearestThePageSize) {
  dev::Ceilings c;
  c.copies = {{4, 46.8, 49}, {8, 52.2, 53}, {16, 51.7, 54}, {256, 54.2, 54.6}};
  ASSERT_NE(dev::copy_for_page(c, 8 << 20), nullptr);
  EXPECT_EQ(dev::copy_for_page(c, 8 << 20)->mib, 8);
  EXPECT_EQ(dev::copy_for_page(c, 512 << 10)->mib, 4);  // below every size: the smallest
  EXPECT_EQ(dev::copy_for_page(c, 100 << 20)->mib, 256);  // log2: 100 MiB is nearer 256 than 16
  EXPECT_EQ(dev::copy_for_page(c, 0), nullptr);
  EXPECT_EQ(dev::copy_for_page(dev::Ceilings{}, 8 << 20), nullptr);
  // 773,349,760 bytes at 52.2 GB/s: the reference README's ≈14.8 ms.
  EXPECT_NEAR(psi::exp::transfer_seconds(773349760.0, 52.2) * 1e3, 14.815, 0.001);
}

TEST(DeviceSummary, FullSizeBlockWeightsMatchTheRecordedParameterCount) {
  // block_full_math.h5 records n_params = 386,674,880 for the official block (BF16: 2 bytes each).
  EXPECT_EQ(psi::exp::block_weight_bytes(psi::model::model_config("ltx2-22b")), 2ull * 386674880ull);
}

TEST(DeviceSummary, SchedulingCountsProbesEqualInEveryCompletedRun) {
  nlohmann::json cases = nlohmann::json::array();
  for (int cycle = 0; cycle < 3; ++cycle) {
    cases.push_back(sched_case("baseline", cycle, "complete", 0.010 * (cycle + 1)));
    cases.push_back(sched_case("reuse+prefetch", cycle, "complete", 0.020));
  }
  psi::exp::SchedulingSummary s = psi::exp::summarize_scheduling(cases);
  ASSERT_EQ(s.schedules.size(), 2u);
  EXPECT_EQ(s.schedules[0].name, "baseline");
  EXPECT_EQ(s.schedules[0].runs, 3);
  ASSERT_EQ(s.schedules[0].walls_s.size(), 2u);  // the warm-up is not measured
  EXPECT_DOUBLE_EQ(psi::report::mean(s.schedules[0].walls_s), 0.025);
  EXPECT_NEAR(psi::report::sample_sd(s.schedules[0].walls_s), 0.00707107, 1e-8);
  EXPECT_EQ(s.probe_names, 10);
  EXPECT_EQ(s.probes_equal_across, 10);
  EXPECT_EQ(s.completed_runs, 6);
  EXPECT_EQ(s.schedules[1].probes_equal_host_min, 10);

  // One run of one schedule with another probe 3: nine of ten equal across runs, and that
  // schedule's fewest-equal-to-host drops to nine.
  cases.push_back(sched_case("reuse+prefetch", 3, "complete", 0.020, "other"));
  s = psi::exp::summarize_scheduling(cases);
  EXPECT_EQ(s.probes_equal_across, 9);
  EXPECT_EQ(s.schedules[1].probes_equal_host_min, 9);
  EXPECT_EQ(s.schedules[0].probes_equal_host_min, 10);

  // A run that did not complete is named, and not counted as a completed run.
  cases.push_back(sched_case("baseline", 4, "scratch_exhausted", 0));
  s = psi::exp::summarize_scheduling(cases);
  EXPECT_EQ(s.schedules[0].outcome, "scratch_exhausted");
  EXPECT_EQ(s.completed_runs, 7);
}

TEST(DeviceSummary, BlockTimeIsTheRecordedBlockSecondsWhenPresent) {
  nlohmann::json cases = nlohmann::json::array();
  for (int cycle = 0; cycle < 3; ++cycle) {
    nlohmann::json c = sched_case("reuse+prefetch", cycle, "complete", 0.5);
    c["block_s"] = 0.020 + 0.010 * cycle;
    c["weights"] = "host-resident";
    c["probes_equal_first"] = 10;
    c.erase("probes_equal_host");  // the CUDA report does not compare with the CPU block
    cases.push_back(c);
  }
  const psi::exp::SchedulingSummary s = psi::exp::summarize_scheduling(cases);
  ASSERT_EQ(s.schedules.size(), 1u);
  const psi::exp::ScheduleRow& r = s.schedules[0];
  EXPECT_TRUE(r.resident);
  ASSERT_EQ(r.block_times().size(), 2u);
  EXPECT_DOUBLE_EQ(psi::report::mean(r.block_times()), 0.035);
  EXPECT_DOUBLE_EQ(psi::report::mean(r.walls_s), 0.5);
  EXPECT_EQ(r.probes_equal_first_min, 10);
  EXPECT_EQ(r.probes_equal_host_min, -1);
}

TEST(DeviceSummary, CountsGoogleTestResults) {
  const std::string text = R"({"tests": 3, "testsuites": [{"name": "Kernels", "testsuite": [
      {"name": "Passes", "status": "RUN", "result": "COMPLETED"},
      {"name": "NeedsGpu", "status": "RUN", "result": "SKIPPED"},
      {"name": "Breaks", "status": "RUN", "result": "COMPLETED", "failures": [{"failure": "x"}]}]}]})";
  const dev::TestProgram p = dev::parse_gtest_json("test_cuda_kernels", text);
  EXPECT_EQ(p.tests, 3);
  EXPECT_EQ(p.skipped, 1);
  EXPECT_EQ(p.failed, 1);
  ASSERT_EQ(p.failures.size(), 1u);
  EXPECT_EQ(p.failures[0], "Kernels.Breaks");
  EXPECT_THROW(dev::parse_gtest_json("x", "[1"), psi::Error);
}

// The command on a folder as scripts/device-check.sh leaves it after a CPU dry run at tiny
// size: reports made by psi itself, a ceilings file, context and steps.
TEST(DeviceSummary, CommandSummarizesACpuCheckFolder) {
  const fs::path dir = fs::temp_directory_path() / ("psi_device_summary_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "tests");
  std::string out;
  ASSERT_EQ(run("run scheduling --quick --model tiny --backend cpu --out " + (dir / "scheduling.h5").string(), &out), 0) << out;
  out.clear();
  ASSERT_EQ(run("run capacity --model tiny --backend cpu --out " + (dir / "capacity.h5").string(), &out), 0) << out;
  out.clear();
  ASSERT_EQ(run("run scheduling --quick --row-tile fit --model tiny --backend cpu --out " +
                    (dir / "scheduling-fit.h5").string(), &out), 0) << out;
  write(dir / "context.tsv", "date\t2026-11-30\ndevice\ttest CPU (CPU backend)\n");
  write(dir / "steps.tsv", "scheduling\t0\t3.0\t\ncapacity\t0\t1.0\t\nblock-controls\t124\t120.0\tstopped at its limit of 120 s\n");
  // Copy rates at the tiny config's 512 KiB page and at 8 MiB: the floor must use the first.
  write(dir / "ceilings.jsonl",
        "{\"kind\": \"copy\", \"MiB\": 0.5, \"h2d_GBps\": 0.25, \"d2h_GBps\": 0.3}\n"
        "{\"kind\": \"copy\", \"MiB\": 8, \"h2d_GBps\": 50, \"d2h_GBps\": 50}\n");
  write(dir / "torch-linear.json",
        R"({"torch": "2.11.0+cu130", "device": "NVIDIA H200", "cases": [{"case": "video-q-proj", "elements": 1048576,
            "psi_backend": "cuda", "psi_vs_recorded": 7, "torch_vs_recorded": 0, "psi_vs_torch": 7}]})");
  write(dir / "tests" / "test_cuda_kernels.json",
        R"({"testsuites": [{"name": "K", "testsuite": [{"name": "A", "status": "RUN", "result": "SKIPPED"}]}]})");
  out.clear();
  ASSERT_EQ(run("device summary " + dir.string() + " --out " + (dir / "summary.md").string() + " --json " +
                    (dir / "summary.json").string(), &out), 0) << out;
  const std::string md = slurp(dir / "summary.md");
  EXPECT_EQ(md, out);
  EXPECT_NE(md.find("# psi device check — test CPU (CPU backend) — 2026-11-30"), std::string::npos) << md;
  EXPECT_NE(md.find("**10 of 10** probes have one SHA-256 in all 12 completed runs"), std::string::npos) << md;
  const double weights = double(psi::exp::block_weight_bytes(psi::model::model_config("tiny")));
  const std::string floor = psi::report::fmt_fixed(weights / 0.25e9 * 1e3, 2);
  for (const char* schedule : {"baseline", "ffn-reuse", "reuse+async-journal", "reuse+prefetch"}) {
    const auto cells = row_cells(md, schedule);
    ASSERT_EQ(cells.size(), 14u) << schedule << "\n" << md;
    EXPECT_EQ(cells[2], floor) << schedule;  // the transfer floor at the 0.5 MiB copy rate
    EXPECT_EQ(cells[10], "n/a") << schedule;  // no GPU memory on the CPU backend
    EXPECT_EQ(cells[12], "10 / 10") << schedule;
    EXPECT_EQ(cells[13], "10 / 10") << schedule;
  }
  EXPECT_NE(md.find("(0.5 MiB: 0.25 GB/s"), std::string::npos) << md;
  EXPECT_NE(md.find("unavailable: no block-controls.h5 (step block-controls timed out (exit 124): stopped at its limit"),
            std::string::npos) << md;
  EXPECT_NE(md.find("unavailable: no probes.h5 (step probes not run)"), std::string::npos) << md;
  // The schedules at tiny's default 64-row tile, then at the row tile that fits (larger).
  EXPECT_NE(md.find("; row tile 64 rows"), std::string::npos) << md;
  const auto fit_section = md.find("## The same at the largest row tile that fits the arena");
  ASSERT_NE(fit_section, std::string::npos) << md;
  const auto fit_tile = md.find("; row tile ", fit_section);
  ASSERT_NE(fit_tile, std::string::npos) << md;
  EXPECT_GT(std::stoll(md.substr(fit_tile + 11)), 64) << md.substr(fit_tile, 40);
  EXPECT_NE(md.find("PyTorch 2.11.0+cu130 on NVIDIA H200."), std::string::npos) << md;
  const auto torch = row_cells(md, "video-q-proj");
  ASSERT_EQ(torch.size(), 6u) << md;
  EXPECT_EQ(torch[1], "1,048,576");
  EXPECT_EQ(torch[3], "0");  // PyTorch here vs the recording
  EXPECT_EQ(torch[4], "7");  // psi vs PyTorch here
  const auto tests = row_cells(md, "test_cuda_kernels");
  ASSERT_EQ(tests.size(), 6u) << md;
  EXPECT_EQ(tests[1], "1");  // tests
  EXPECT_EQ(tests[3], "1");  // skipped
  EXPECT_EQ(tests[4], "0");  // failed
  const nlohmann::json j = nlohmann::json::parse(slurp(dir / "summary.json"));
  EXPECT_EQ(j["reports"]["scheduling"]["cases"].size(), 12u);
  EXPECT_EQ(j["reports"]["capacity"]["backend"], "cpu");
  EXPECT_EQ(j["torch_linear"]["cases"][0]["psi_vs_torch"], 7);
  fs::remove_all(dir);
}

TEST(DeviceSummary, CommandRefusesAMissingFolder) {
  std::string out;
  EXPECT_EQ(run("device summary /nonexistent/psi-check", &out), 2) << out;
  EXPECT_NE(out.find("psi: error: /nonexistent/psi-check: no such folder"), std::string::npos) << out;
}
