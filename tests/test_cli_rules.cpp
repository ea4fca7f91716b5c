// The rules every command shares: the exit-status rule stated under each command's help, and
// --reference named for what it takes (a folder for psi run, a recording file for psi probe,
// which also accepts the folder).
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "tests/psi_command.h"
#include "tests/recordings.h"

namespace fs = std::filesystem;

namespace {

using psi::testing::Outcome;

Outcome run_psi(const std::string& args) {
  const fs::path dir = fs::temp_directory_path() / ("psi_cli_rules_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  Outcome r = psi::testing::run_psi_in(args, dir);
  fs::remove_all(dir);
  return r;
}

const fs::path kRef = psi::test::reference_dir();

}  // namespace

TEST(CliRules, EveryCommandsHelpStatesTheExitRule) {
  const std::vector<std::string> commands = {"",        "list",    "run",        "report",          "merge",
                                             "compare", "probe",   "oracle",     "oracle certify",  "oracle explain",
                                             "synthinit", "device", "device ceilings", "device summary"};
  for (const auto& c : commands) {
    const Outcome r = run_psi(c + (c.empty() ? "" : " ") + "--help");
    EXPECT_EQ(r.status, 0) << c << r.err;
    for (const char* part : {"Exit status: 0 it ran", "1 a comparison asked for", "2 bad input", "3 internal error",
                             "128 + n interrupted by signal n"})
      EXPECT_NE(r.out.find(part), std::string::npos) << "psi " << c << " --help lacks '" << part << "':\n" << r.out;
  }
  EXPECT_NE(run_psi("probe --help").out.find("with --require-bitwise a failed claim is exit 1"), std::string::npos);
  EXPECT_NE(run_psi("compare --help").out.find("nothing was compared"), std::string::npos);
}

TEST(CliRules, ReferenceSaysWhatItTakes) {
  EXPECT_NE(run_psi("run --help").out.find("FOLDER of recordings"), std::string::npos);
  EXPECT_NE(run_psi("probe --help").out.find("FILE: the recording to use"), std::string::npos);

  const Outcome file_for_run =
      run_psi("run projection-oracle --reference " + (kRef / "probes_linear.h5").string() + " --out /tmp/never.h5");
  EXPECT_EQ(file_for_run.status, 2);
  EXPECT_NE(file_for_run.err.find("not a folder (a regular file); psi run takes the folder of recordings"), std::string::npos)
      << file_for_run.err;

  const Outcome missing = run_psi("probe audio-ff-up --reference " + (kRef / "nope.h5").string());
  EXPECT_EQ(missing.status, 2);
  EXPECT_NE(missing.err.find("nope.h5: no such file (psi probe takes a recording file, or a folder holding "
                             "probes_linear.h5)"),
            std::string::npos)
      << missing.err;

  // The folder psi run takes stands for the case's file in it: the same result as the file.
  const Outcome folder = run_psi("probe video-q-proj --variant dense --reference " + kRef.string());
  const Outcome file = run_psi("probe video-q-proj --variant dense --reference " + (kRef / "probes_linear.h5").string());
  ASSERT_EQ(folder.status, 0) << folder.err;
  ASSERT_EQ(file.status, 0) << file.err;
  auto table = [](const std::string& out) { return out.substr(out.find("variant"), out.rfind("\n(") - out.find("variant")); };
  EXPECT_EQ(table(folder.out), table(file.out));
}
