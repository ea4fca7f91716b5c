// SIGINT or SIGTERM during `psi run one-token` (the tiny config, a few seconds) stops it at the
// next step boundary with exit 130, says where its partial data was, and leaves neither the
// report nor the temporary file behind. The signal is sent once the run's temporary report
// exists (its handlers are installed by then) and the trajectory is under way.
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

void interrupt_run(int sig, const std::string& sig_name) {
  const fs::path dir = fresh_dir("interrupt_" + sig_name);
  const fs::path io = fresh_dir("interrupt_io_" + sig_name);
  const pid_t pid = spawn_psi({"run", "one-token", "--out", (dir / "r.h5").string()}, io);
  ASSERT_GT(pid, 0);
  const auto temp = wait_for_temp(dir, "r.h5", pid);
  if (!temp) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    FAIL() << "psi run never created its temporary report in " << dir;
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ASSERT_EQ(::kill(pid, sig), 0);
  const PsiRun r = wait_psi(pid, io);
  ASSERT_EQ(r.signal, 0) << "psi died of signal " << r.signal << " instead of handling " << sig_name;
  ASSERT_NE(r.status, 0) << "the run finished before the signal arrived; stdout:\n" << r.out;
  EXPECT_EQ(r.status, 130) << r.err;
  // The notice names the temporary file; the error line says where the run stopped.
  EXPECT_NE(r.err.find("psi: interrupted by " + sig_name + " at stage "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("partial data was in " + temp->string() + ", now removed"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("\npsi: error: interrupted by " + sig_name + " at stage "), std::string::npos) << r.err;
  EXPECT_EQ(leftovers(dir), std::vector<std::string>{});
  EXPECT_EQ(r.out.find("report:"), std::string::npos) << r.out;
}

}  // namespace

TEST(Interrupt, SigintStopsTheRunCleanly) { interrupt_run(SIGINT, "SIGINT"); }

TEST(Interrupt, SigtermStopsTheRunCleanly) { interrupt_run(SIGTERM, "SIGTERM"); }

// The control: left alone, the same command completes and its report appears under the final
// name, with no temporary file left.
TEST(Interrupt, UninterruptedRunLeavesOnlyTheReport) {
  const fs::path dir = fresh_dir("interrupt_none");
  const PsiRun r = run_psi({"run", "one-token", "--out", (dir / "r.h5").string()});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(leftovers(dir), std::vector<std::string>{"r.h5"});
}
