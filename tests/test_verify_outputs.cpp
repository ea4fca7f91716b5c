// What psi writes, psi verifies (issue 57, class 7): every HDF5 file every command writes passes
// `psi verify` on its own — each tensor with its sha256_full, every attribute well-formed, the
// schema psi's. The writers are found from psi itself: every output option the commands' --help
// lists (an output path is shown as PATH) and every experiment `psi list` names; an output this
// test does not know fails it, so that a new writer is verified from its first day.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/psi_command.h"

namespace fs = std::filesystem;
using psi::testing::Outcome;
using psi::testing::TempDir;

namespace {

Outcome psi_in(const std::string& args, const TempDir& dir) { return psi::testing::run_psi_in(args, dir.path()); }

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

// The names under "Subcommands:" in a --help text.
std::vector<std::string> subcommands(const std::string& help) {
  std::vector<std::string> out;
  bool in_section = false;
  static const std::regex entry(R"(^  ([a-z][a-z0-9-]*)\s)");
  for (const std::string& l : lines_of(help)) {
    if (l == "Subcommands:") in_section = true;
    else if (in_section && l.empty()) in_section = false;
    std::smatch m;
    if (in_section && std::regex_search(l, m, entry)) out.push_back(m[1]);
  }
  return out;
}

// Every command line's output options: "<command> <option>" for each option shown as PATH
// (psi's output_path check), --allow-link-to (an input) left out.
std::set<std::string> output_options(const TempDir& dir) {
  std::set<std::string> out;
  static const std::regex option(R"(^\s+(--[a-z-]+) TEXT:PATH)");
  std::vector<std::string> commands = subcommands(psi_in("--help", dir).out);
  for (std::size_t i = 0; i < commands.size(); ++i) {
    const Outcome help = psi_in(commands[i] + " --help", dir);
    const std::vector<std::string> nested = subcommands(help.out);
    for (const std::string& n : nested) commands.push_back(commands[i] + " " + n);
    if (!nested.empty()) continue;
    for (const std::string& l : lines_of(help.out)) {
      std::smatch m;
      if (std::regex_search(l, m, option) && m[1] != "--allow-link-to") out.insert(commands[i] + " " + m[1].str());
    }
  }
  return out;
}

// The output options that write something other than HDF5, and what.
const std::map<std::string, std::string> kNotHdf5 = {
    {"compare --list", "CSV"},         {"oracle certify --list", "CSV"},   {"device summary --out", "Markdown"},
    {"device summary --json", "JSON"}, {"kernels fragile --out", "JSON"},  {"kernels search --out", "JSON"},
    {"probe --figures", "a folder of SVG and PNG figures"},
};

// Every .h5 file under `dir` passes psi verify; returns how many there were.
int verify_all(const TempDir& dir, const std::string& what) {
  int n = 0;
  for (const auto& e : fs::directory_iterator(dir.path())) {
    if (e.path().extension() != ".h5") continue;
    ++n;
    const Outcome v = psi_in("verify " + e.path().string(), dir);
    EXPECT_EQ(v.status, 0) << what << " wrote " << e.path() << ", which psi verify refuses:\n" << v.out << v.err;
    EXPECT_NE(v.out.find(": OK ("), std::string::npos) << what << ": " << v.out;
  }
  return n;
}

void run_ok(const std::string& args, const TempDir& dir) {
  const Outcome r = psi_in(args, dir);
  ASSERT_EQ(r.status, 0) << "psi " << args << "\n" << r.out << r.err;
}

}  // namespace

// The HDF5 writers of the commands' own options (psi run's are its experiments, below).
TEST(VerifyOutputs, EveryCommandsHdf5OutputVerifies) {
  const TempDir dir("psi_verify_outputs");
  const auto out = [&](const std::string& name) { return (dir / name).string(); };
  const std::string safetensors = (fs::path(PSI_TEST_DATA) / "oracle" / "eq5.safetensors").string();
  // What each HDF5 output option is run as: small configurations and --quick, as elsewhere.
  const std::map<std::string, std::vector<std::string>> writers = {
      {"synthinit --out", {"synthinit transformer_blocks.0.attn1.to_q.weight --shape 4 8 --out " + out("synthinit.h5")}},
      {"seal --out", {"seal " + safetensors + " --out " + out("sealed.h5")}},
      {"probe --out", {"probe video-q-proj --variant dense --out " + out("probe.h5")}},
      {"kernels where --capture", {"kernels where --step 1 --capture " + out("capture.h5")}},
      {"merge --out",
       {"run probes --quick --shard 0/2 --out " + out("shard0.h5"), "run probes --quick --shard 1/2 --out " + out("shard1.h5"),
        "merge " + out("shard0.h5") + " " + out("shard1.h5") + " --out " + out("merged.h5")}},
      {"run --out", {"run scheduling --quick --out " + out("scheduling.h5")}},
  };
  const std::set<std::string> options = output_options(dir);
  for (const std::string& option : options) {
    if (kNotHdf5.count(option)) continue;
    const auto w = writers.find(option);
    if (w == writers.end()) {
      ADD_FAILURE() << "psi " << option << " writes a file this test does not know: if it is HDF5, run it here so "
                    << "that psi verify checks it; if not, name what it writes in kNotHdf5";
      continue;
    }
    for (const std::string& args : w->second) run_ok(args, dir);
  }
  for (const auto& [option, args] : writers) EXPECT_TRUE(options.count(option)) << "psi has no " << option;
  EXPECT_EQ(verify_all(dir, "psi's commands"), 8);
}

// Every experiment's report, with whatever side files it writes beside it (transport-control's
// states), and one-token's per-operator capture (psi run's own option of that experiment).
TEST(VerifyOutputs, EveryExperimentsReportVerifies) {
  const TempDir dir("psi_verify_outputs");
  const Outcome list = psi_in("list", dir);
  ASSERT_EQ(list.status, 0) << list.err;
  int experiments = 0;
  for (const std::string& l : lines_of(list.out)) {
    const std::string name = l.substr(0, l.find(' '));
    if (name.empty()) continue;
    ++experiments;
    const std::string capture = name == "one-token" ? " --capture " + (dir / "one-token.capture.h5").string() : "";
    run_ok("run " + name + " --quick --out " + (dir / (name + ".h5")).string() + capture, dir);
  }
  EXPECT_GE(experiments, 10);
  EXPECT_GT(verify_all(dir, "psi run"), experiments + 1);
}
