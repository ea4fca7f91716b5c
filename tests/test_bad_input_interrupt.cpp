// SIGINT or SIGTERM during `psi run one-token` (the tiny config, a few seconds) stops it at the
// next step boundary with exit 130 and one stderr line saying where it stopped and where the
// cases finished so far were put (<report>.partial.h5); nothing is left under the report's
// name and no temporary file remains. The signal is sent once the run's temporary report exists
// (its handlers are installed by then) and the trajectory is under way.
#include "reports/state_file.h"
#include "tests/test_bad_input_support.h"

using namespace psi::badinput;

namespace {

// The temporary report file StateWriter made beside `final_name`, once it appears.
std::optional<fs::path> wait_for_temp(const fs::path& dir, const std::string& final_name, pid_t pid) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (std::chrono::steady_clock::now() < deadline) {
    for (const auto& e : fs::directory_iterator(dir))
      if (e.path().filename().string().starts_with(final_name + ".tmp.")) return e.path();
    if (::waitpid(pid, nullptr, WNOHANG) == pid) return std::nullopt;  // it ended without one
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return std::nullopt;
}

// Interrupts `psi run one-token --out <dir>/r.h5` with `sig` and checks the contract; returns
// the folder.
fs::path interrupt_run(int sig, const std::string& sig_name) {
  const fs::path dir = fresh_dir("interrupt_" + sig_name);
  const fs::path io = fresh_dir("interrupt_io_" + sig_name);
  const pid_t pid = spawn_psi({"run", "one-token", "--out", (dir / "r.h5").string()}, io);
  EXPECT_GT(pid, 0);
  const auto temp = wait_for_temp(dir, "r.h5", pid);
  if (!temp) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    ADD_FAILURE() << "psi run never created its temporary report in " << dir;
    return dir;
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(::kill(pid, sig), 0);
  const PsiRun r = wait_psi(pid, io);
  EXPECT_EQ(r.signal, 0) << "psi died of signal " << r.signal << " instead of handling " << sig_name;
  EXPECT_NE(r.status, 0) << "the run finished before the signal arrived; stdout:\n" << r.out;
  EXPECT_EQ(r.status, 130) << r.err;
  const fs::path partial = dir / "r.partial.h5";
  EXPECT_TRUE(r.err.starts_with("psi: error: interrupted by " + sig_name + " at stage ")) << r.err;
  EXPECT_NE(r.err.find("; no report written under " + (dir / "r.h5").string() +
                       "; the cases finished so far are in " + partial.string() + "\n"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "not one line: " << r.err;
  EXPECT_FALSE(fs::exists(*temp));
  EXPECT_EQ(leftovers(dir), std::vector<std::string>{"r.partial.h5"});
  EXPECT_EQ(r.out.find("report:"), std::string::npos) << r.out;
  return dir;
}

}  // namespace

TEST(Interrupt, SigintStopsTheRunCleanly) { interrupt_run(SIGINT, "SIGINT"); }

TEST(Interrupt, SigtermStopsTheRunCleanly) { interrupt_run(SIGTERM, "SIGTERM"); }

// Open (experiments/report.cpp Report::abandon, reports/h5.cpp File::abandon_to): the
// partial report of an interrupted run gets no root attributes, so psi's own reader refuses it
// ("not a psi file: no root attribute 'schema'") and `psi report` cannot open it.
TEST(FoundBug, InterruptedRunsPartialReportIsAPsiFile) {
  const fs::path dir = interrupt_run(SIGINT, "SIGINT");
  const fs::path partial = dir / "r.partial.h5";
  ASSERT_TRUE(fs::exists(partial));
  try {
    psi::reports::StateReader r(partial);
    EXPECT_EQ(r.format(), "psi-h5/1");
    EXPECT_EQ(r.run_info().experiment, "one-token");
  } catch (const psi::Error& e) {
    ADD_FAILURE() << e.what();
  }
}

// The control: left alone, the same command completes and its report appears under the final
// name, with no temporary file left.
TEST(Interrupt, UninterruptedRunLeavesOnlyTheReport) {
  const fs::path dir = fresh_dir("interrupt_none");
  const PsiRun r = run_psi({"run", "one-token", "--quick", "--out", (dir / "r.h5").string()});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(leftovers(dir), std::vector<std::string>{"r.h5"});
}
