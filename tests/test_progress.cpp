// The progress line: one line for a whole command (parts fold into the first Progress alive,
// without repeating its title or restarting its elapsed time), and a plain line per period
// when stderr is not a terminal.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "engine/interrupt.h"
#include "engine/progress.h"

namespace fs = std::filesystem;

namespace {

std::vector<std::string> lines_of(const fs::path& p) {
  std::ifstream in(p);
  std::vector<std::string> out;
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

// Runs a shell command; its exit status into `status` and the wall seconds it took returned.
double timed_system(const std::string& command, int& status) {
  const auto t0 = std::chrono::steady_clock::now();
  status = std::system(command.c_str());
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

TEST(Progress, PartsShareTheCommandsLine) {
  ::setenv("PSI_PROGRESS_SECONDS", "0", 1);  // a plain line at every step (stderr is a file here)
  const fs::path log = fs::temp_directory_path() / ("psi_progress_" + std::to_string(::getpid()) + ".txt");
  std::fflush(stderr);
  const int saved = ::dup(STDERR_FILENO);
  FILE* f = std::fopen(log.c_str(), "w");
  ASSERT_NE(f, nullptr);
  ::dup2(::fileno(f), STDERR_FILENO);
  {
    psi::Progress run("one-token", 0);
    psi::Progress::expect_parts(2);
    {
      psi::Progress a("one-token one-token float64 free-running", 2);
      a.step("stage 1 step 1");
      a.step("stage 1 step 2");
    }
    {
      psi::Progress b("one-token dense", 1);
      b.step("stage 2 step 3");
    }
  }
  std::fflush(stderr);
  ::dup2(saved, STDERR_FILENO);
  ::close(saved);
  std::fclose(f);
  const auto lines = lines_of(log);
  fs::remove(log);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_TRUE(lines[0].starts_with("one-token: part 1/2 one-token float64 free-running: stage 1 step 1  [1/2]  ")) << lines[0];
  // The part's number says how far the command is: out of the parts declared.
  EXPECT_TRUE(lines[2].starts_with("one-token: part 2/2 dense: stage 2 step 3  [1/1]  ")) << lines[2];
  EXPECT_NE(lines[2].find("part ETA 0.0s"), std::string::npos) << lines[2];
  // The whole command's units: the first part's 1 of its 2, the second part counted like it
  // until it begins (~); then every part's, 3 of 3, and the whole command's ETA.
  EXPECT_NE(lines[0].find(", whole command [1/~4] ETA "), std::string::npos) << lines[0];
  EXPECT_NE(lines[1].find(", whole command [2/~4] ETA "), std::string::npos) << lines[1];
  EXPECT_NE(lines[2].find(", whole command [3/3] ETA 0.0s"), std::string::npos) << lines[2];
  for (const auto& l : lines) {
    EXPECT_EQ(l.find("one-token one-token"), std::string::npos) << l;
    EXPECT_EQ(l.find('\r'), std::string::npos) << l;
    EXPECT_EQ(l.find('\033'), std::string::npos) << l;
  }
}

// psi run with stderr in a file: plain progress lines of one experiment (at every step with
// PSI_PROGRESS_SECONDS=0), and none at all for a run shorter than the first line's delay.
TEST(Progress, PlainLinesWhenStderrIsNotATerminal) {
  const fs::path dir = fs::temp_directory_path() / ("psi_progress_cli_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string run = std::string(PSI_BINARY) + " run capacity --out " + (dir / "cap.h5").string() + " >/dev/null 2>";
  ASSERT_EQ(std::system(("PSI_PROGRESS_SECONDS=0 " + run + (dir / "every.txt").string()).c_str()), 0);
  // The progress lines; a step slow enough (under a sanitizer) also gets a pulse, which
  // LongOperatorsPulseInALog tests.
  std::vector<std::string> every;
  for (const std::string& line : lines_of(dir / "every.txt"))
    if (!line.starts_with("psi: working")) every.push_back(line);
  ASSERT_EQ(every.size(), 6u);
  for (std::size_t i = 0; i < every.size(); ++i) {
    EXPECT_TRUE(every[i].starts_with("capacity: ")) << every[i];
    EXPECT_NE(every[i].find("[" + std::to_string(i + 1) + "/6]"), std::string::npos) << every[i];
  }
  int status = -1;
  const double took = timed_system("env -u PSI_PROGRESS_SECONDS " + run + (dir / "quiet.txt").string(), status);
  ASSERT_EQ(status, 0);
  // Shorter than the first line's delay (not so under a sanitizer, where the line is due).
  if (took < psi::kFirstLineSeconds) {
    EXPECT_TRUE(lines_of(dir / "quiet.txt").empty());
  }
  fs::remove_all(dir);
}

// A command of several runs numbers each out of all of them ("part 2/2"), never "part 2" alone.
TEST(Progress, PartsOfARunAreCountedOutOfTheirTotal) {
  const fs::path dir = fs::temp_directory_path() / ("psi_progress_parts_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string run = "PSI_PROGRESS_SECONDS=0 " + std::string(PSI_BINARY) + " run fixed-budget --out " +
                          (dir / "fb.h5").string() + " >/dev/null 2>" + (dir / "err.txt").string();
  ASSERT_EQ(std::system(run.c_str()), 0);
  const auto lines = lines_of(dir / "err.txt");
  ASSERT_FALSE(lines.empty());
  int first = 0, second = 0;
  for (const auto& l : lines) {
    first += l.starts_with("fixed-budget: part 1/2 capped (PSI): ");
    second += l.starts_with("fixed-budget: part 2/2 uncapped (host): ");
  }
  EXPECT_EQ(first + second, int(lines.size())) << lines.front() << "\n" << lines.back();
  EXPECT_GT(first, 0);
  EXPECT_GT(second, 0);
  fs::remove_all(dir);
}

// A single long step (one operator of the full block runs for minutes) still shows it is alive
// in a log: the operators' tasks pulse, and after 10 s without a line one plain line says
// where the work is; the next pulses within the period print nothing.
TEST(Progress, LongOperatorsPulseInALog) {
  const fs::path dir = fs::temp_directory_path() / ("psi_progress_pulse_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::fflush(stderr);
  const int saved = ::dup(STDERR_FILENO);
  ASSERT_TRUE(std::freopen((dir / "err.txt").c_str(), "w", stderr));
  ::setenv("PSI_PROGRESS_SECONDS", "0", 1);  // a line at every step; pulses keep their 10 s floor
  psi::check_interrupt("probe block-full, variant official-h200");
  psi::progress_pulse();  // under the period since the process began: nothing
  std::this_thread::sleep_for(std::chrono::milliseconds(10200));
  for (int i = 0; i < 1000; ++i) psi::progress_pulse();
  std::fflush(stderr);
  ::dup2(saved, STDERR_FILENO);
  ::close(saved);
  const auto lines = lines_of(dir / "err.txt");
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_TRUE(lines[0].starts_with("psi: working at probe block-full, variant official-h200, 1")) << lines[0];
  EXPECT_TRUE(lines[0].ends_with(" s elapsed")) << lines[0];
  fs::remove_all(dir);
}

// In a log the first line comes within a few seconds (kFirstLineSeconds), not a whole period
// (30 s by default) into the command, and says how far the whole command is: transport-control
// runs five parts of 22 steps each in a few seconds, so one line, at about 2 s, out of all 110.
TEST(Progress, FirstPlainLineComesWithinSeconds) {
  const fs::path dir = fs::temp_directory_path() / ("psi_progress_first_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string run = "env -u PSI_PROGRESS_SECONDS " + std::string(PSI_BINARY) + " run transport-control --out " +
                          (dir / "tc.h5").string() + " >/dev/null 2>" + (dir / "err.txt").string();
  int status = -1;
  const double took = timed_system(run, status);
  ASSERT_EQ(status, 0);
  // Progress lines apart from a long operator's pulses ("psi: working at ..."), which a slowed run
  // (a sanitizer, a busy machine) adds on their own clock.
  std::vector<std::string> lines;
  for (const std::string& l : lines_of(dir / "err.txt"))
    if (!l.starts_with("psi: working")) lines.push_back(l);
  if (took < psi::kFirstLineSeconds + 0.5) GTEST_SKIP() << "the run took only " << took << " s";
  ASSERT_GE(lines.size(), 1u);
  // Every further line a period (30 s) later.
  EXPECT_LE(lines.size(), std::size_t(1 + took / 30.0)) << lines.back();
  const std::smatch m = [&] {
    std::smatch r;
    std::regex_search(lines[0], r, std::regex("  ([0-9.]+)s elapsed, part ETA [0-9.]+s, whole command \\[([0-9]+)/~?([0-9]+)\\] ETA "));
    return r;
  }();
  ASSERT_EQ(m.size(), 4u) << lines[0];
  const double at = std::stod(m[1].str());
  EXPECT_GE(at, psi::kFirstLineSeconds) << lines[0];
  EXPECT_LT(at, psi::kFirstLineSeconds + 3.0) << lines[0];
  EXPECT_GT(std::stol(m[2].str()), 0) << lines[0];
  EXPECT_EQ(std::stol(m[3].str()), 110) << lines[0];
  fs::remove_all(dir);
}

// A period the user sets holds for the first line too: PSI_PROGRESS_SECONDS=86400 (what the
// bad-input tests set, whose contract is one stderr line) prints no early line in a run longer
// than the default first line's 2 s.
TEST(Progress, ASetPeriodHoldsForTheFirstLine) {
  const fs::path dir = fs::temp_directory_path() / ("psi_progress_set_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string run = "PSI_PROGRESS_SECONDS=86400 " + std::string(PSI_BINARY) + " run one-token --quick --out " +
                          (dir / "t.h5").string() + " >/dev/null 2>" + (dir / "err.txt").string();
  int status = -1;
  const double took = timed_system(run, status);
  ASSERT_EQ(status, 0);
  if (took < psi::kFirstLineSeconds + 1.5) GTEST_SKIP() << "the run took only " << took << " s";
  EXPECT_EQ(lines_of(dir / "err.txt"), std::vector<std::string>{});
  fs::remove_all(dir);
}
