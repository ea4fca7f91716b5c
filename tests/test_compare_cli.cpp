// `psi compare` as a user runs it: the psi binary on files made with h5py
// (tests/data/compare/make_fixtures.py) and on the recordings; exit codes and key lines.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>
#include "hdf5/h5.h"
#include "tests/recordings.h"

namespace fs = std::filesystem;

namespace {

struct Outcome {
  int status = -1;
  std::string out;  // stdout and stderr together
};

Outcome run_psi(const std::string& args) {
  Outcome r;
  const std::string cmd = std::string(PSI_BINARY) + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  std::size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

const std::string kData = std::string(PSI_TEST_DATA) + "/compare/";
const std::string kA = kData + "user_a.h5";
const std::string kB = kData + "user_b.h5";
const std::string kRef = psi::test::reference_dir().string() + "/";

// The line of the table that names `dataset`.
std::string line_of(const std::string& out, const std::string& dataset) {
  std::size_t pos = 0;
  while (pos < out.size()) {
    std::size_t end = out.find('\n', pos);
    std::string line = out.substr(pos, end - pos);
    if (line.find(" " + dataset) != std::string::npos) return line;
    if (end == std::string::npos) break;
    pos = end + 1;
  }
  return "";
}

}  // namespace

TEST(CompareCli, UserFileAgainstItselfExitsZero) {
  Outcome r = run_psi("compare " + kA + " " + kA);
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_NE(line_of(r.out, "/stage1/latent").find("0/32"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("summary: 3 compared (3 bitwise equal, 0 differ)"), std::string::npos) << r.out;
}

// make_fixtures.py changes stage1/latent[1, 3] by one BF16 step and [2, 5] by three.
TEST(CompareCli, UserFilesThatDifferExitOneWithTheDifference) {
  Outcome r = run_psi("compare " + kA + " " + kB);
  EXPECT_EQ(r.status, 1) << r.out;
  const std::string latent = line_of(r.out, "/stage1/latent");
  EXPECT_EQ(latent.rfind("differs", 0), 0u) << latent;
  EXPECT_NE(latent.find(" 2/32 "), std::string::npos) << latent;
  EXPECT_NE(latent.find(" 3 "), std::string::npos) << latent;  // max ULP
  EXPECT_NE(latent.find("@11 [1, 3]"), std::string::npos) << latent;
  EXPECT_EQ(line_of(r.out, "/stage1/scale").rfind("equal", 0), 0u) << r.out;
  EXPECT_EQ(line_of(r.out, "/only_in_a").rfind("only_a", 0), 0u) << r.out;
  EXPECT_EQ(line_of(r.out, "/only_in_b").rfind("only_b", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("summary: 2 compared (1 bitwise equal, 1 differ), 0 not stored, 1 only in A, 1 only in B"),
            std::string::npos)
      << r.out;
}

TEST(CompareCli, OnlyAndStrict) {
  Outcome scale = run_psi("compare " + kA + " " + kB + " --only 'scale$'");
  EXPECT_EQ(scale.status, 0) << scale.out;
  EXPECT_EQ(line_of(scale.out, "/stage1/latent"), "");
  // Datasets in one file only: nothing compared, which never passes a bitwise check.
  Outcome only = run_psi("compare " + kA + " " + kB + " --only only_in");
  EXPECT_EQ(only.status, 1) << only.out;
  EXPECT_NE(only.out.find("nothing was compared"), std::string::npos) << only.out;
  Outcome subset = run_psi("compare " + kA + " " + kB + " --subset --only 'scale$'");
  EXPECT_EQ(subset.status, 0) << subset.out;
  Outcome strict = run_psi("compare " + kA + " " + kB + " --only only_in --strict");
  EXPECT_EQ(strict.status, 1) << strict.out;
}

// --only is a pattern from anyone: matched in linear time (RE2), so a pattern that makes a
// backtracking engine run for hours, or a nesting deep enough to overflow a recursive one,
// ends at once; a malformed or overlong one is refused with exit 2 and one line.
TEST(CompareCli, OnlyPatternsCannotHangOrCrash) {
  Outcome redos = run_psi("compare " + kA + " " + kB + " --only '^(.*.*.*.*.*.*.*.*.*.*.*.*.*.*.*.*)*x$'");
  EXPECT_EQ(redos.status, 1) << redos.out;
  EXPECT_NE(redos.out.find("nothing was compared"), std::string::npos) << redos.out;
  const std::string deep = std::string(2000, '(') + "scale" + std::string(2000, ')');
  Outcome nested = run_psi("compare " + kA + " " + kB + " --only '" + deep + "$'");
  EXPECT_TRUE(nested.status == 0 || nested.status == 2) << nested.status << nested.out;
  const std::string deeper = std::string(20000, '(') + "a" + std::string(20000, ')');
  Outcome overlong = run_psi("compare " + kA + " " + kB + " --only '" + deeper + "'");
  EXPECT_EQ(overlong.status, 2);
  EXPECT_NE(overlong.out.find("longer than 4096 characters"), std::string::npos) << overlong.out;
  EXPECT_EQ(std::count(overlong.out.begin(), overlong.out.end(), '\n'), 1) << overlong.out;  // stdout empty
  Outcome bad = run_psi("compare " + kA + " " + kB + " --only 'a('");
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.out.find("not a valid regular expression"), std::string::npos) << bad.out;
}

TEST(CompareCli, JsonOutput) {
  Outcome r = run_psi("compare " + kA + " " + kB + " --json");
  EXPECT_EQ(r.status, 1);
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["exit_code"], 1);
  bool found = false;
  for (const auto& d : j["datasets"]) {
    if (d["path_a"] != "/stage1/latent") continue;
    found = true;
    EXPECT_EQ(d["status"], "differs");
    EXPECT_EQ(d["dtype"], "bfloat16");
    EXPECT_EQ(d["differing"], 2);
    EXPECT_EQ(d["compared"], 32);
    EXPECT_EQ(d["max_ulp"], 3);
    EXPECT_EQ(d["first_difference"]["flat_index"], 11);
    EXPECT_EQ(d["first_difference"]["index"], nlohmann::json::array({1, 3}));
  }
  EXPECT_TRUE(found) << r.out;
}

TEST(CompareCli, BadInputExitsTwoWithOneLine) {
  const fs::path dir = fs::temp_directory_path() / ("psi_test_compare_cli_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string text = (dir / "notes.h5").string();
  { std::ofstream(text) << "plain text\n"; }

  Outcome missing = run_psi("compare " + kA + " " + (dir / "missing.h5").string());
  EXPECT_EQ(missing.status, 2) << missing.out;
  EXPECT_NE(missing.out.find("psi: error: " + (dir / "missing.h5").string() + ": no such file"), std::string::npos)
      << missing.out;

  Outcome not_h5 = run_psi("compare " + text + " " + kA);
  EXPECT_EQ(not_h5.status, 2) << not_h5.out;
  EXPECT_NE(not_h5.out.find("psi: error: " + text + ": not an HDF5, NumPy .npy or safetensors file"), std::string::npos)
      << not_h5.out;

  Outcome bad_map = run_psi("compare " + kA + " " + kA + " --map nothing");
  EXPECT_EQ(bad_map.status, 2) << bad_map.out;
  fs::remove_all(dir);
}

// block_small against itself, and its FLASH attn1 against its MATH attn1 through --map (the
// reference README's 81,747 differing elements, relative L2 1.68e-3).
TEST(CompareCli, RecordingAgainstItselfAndMappedProbes) {
  Outcome same = run_psi("compare " + kRef + "block_small.h5 " + kRef + "block_small.h5");
  EXPECT_EQ(same.status, 0) << same.out;
  EXPECT_NE(same.out.find("summary: 43 compared (43 bitwise equal, 0 differ)"), std::string::npos) << same.out;

  Outcome mapped = run_psi("compare " + kRef + "block_small.h5 " + kRef +
                   "block_small.h5 --only '^/block_small/flash/attn1$' --map /block_small/flash/=/block_small/math/");
  EXPECT_EQ(mapped.status, 1) << mapped.out;
  const std::string l = line_of(mapped.out, "/block_small/flash/attn1 => /block_small/math/attn1");
  EXPECT_NE(l.find(" 81747/315392 "), std::string::npos) << mapped.out;
  EXPECT_NE(l.find(" 1.677e-03 "), std::string::npos) << mapped.out;
}

TEST(CompareCli, DtypeMismatchWithRecordingExitsTwo) {
  // The fixture's float32 tensor paired, through --map, with a BF16 tensor of a recording.
  Outcome r = run_psi("compare " + kA + " " + kRef + "block_small.h5 --only '^/stage1/scale$' --map " +
              "/stage1/scale=/block_small/inputs/audio.x");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("psi: error: " + kA + ":/stage1/scale vs " + kRef +
                       "block_small.h5:/block_small/inputs/audio.x: dtype_mismatch: dtype float32 in A vs bfloat16 in B"),
            std::string::npos)
      << r.out;
}

// A file name (or dataset name, partial marker) holding a newline cannot forge a line of the
// table: every line psi prints is one it wrote.
TEST(CompareCli, NamesWithNewlinesStayOnOneLine) {
  const fs::path dir = fs::temp_directory_path() / ("psi_compare_newline_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path forged = dir / "a\nsummary: 99 compared (99 bitwise equal, 0 differ).h5";
  fs::copy_file(kA, forged);
  Outcome r = run_psi("compare '" + forged.string() + "' " + kA);
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(r.out.find("\nsummary: 99"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("A: " + dir.string() + "/a\\nsummary: 99"), std::string::npos) << r.out;
  fs::remove_all(dir);
}

// Reports travel between machines (issue 43.1): two runs on the same recordings reached by
// other paths (here the recording folder and a symbolic link to it) are equal reports; the
// paths are provenance, which psi compare shows and does not count. Before, the path in the
// tables' notes and the cases made psi compare exit 1.
TEST(CompareCli, OneRecordingReachedByTwoPathsGivesEqualReports) {
  const fs::path dir = fs::temp_directory_path() / ("psi_compare_paths_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::create_directory_symlink(fs::absolute(psi::test::reference_dir()), dir / "linked_reference");
  for (const std::string experiment : {"projection-oracle", "probes"}) {
    const std::string a = (dir / (experiment + "_a.h5")).string(), b = (dir / (experiment + "_b.h5")).string();
    const std::string quick = experiment == "probes" ? " --quick" : "";
    ASSERT_EQ(run_psi("run " + experiment + quick + " --reference " + kRef + " --out " + a).status, 0);
    ASSERT_EQ(run_psi("run " + experiment + quick + " --reference " + (dir / "linked_reference").string() + " --out " + b).status, 0);
    const Outcome r = run_psi("compare " + a + " " + b);
    EXPECT_EQ(r.status, 0) << experiment << "\n" << r.out;
    EXPECT_NE(r.out.find("paths of inputs differ, not counted"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("linked_reference"), std::string::npos) << "the provenance is shown: " << r.out;
  }
  fs::remove_all(dir);
}

// --map with '*' pairs two layouts of the same states: user_a.h5's /stage1/latent with
// /steps/1/latent_video of a file laid out by step; a map whose '*'s do not pair is refused.
TEST(CompareCli, GlobMapPairsTwoLayouts) {
  const std::string b = (std::filesystem::temp_directory_path() / ("psi_glob_map_" + std::to_string(::getpid()) + ".h5")).string();
  {
    const psi::hdf5::File a = psi::hdf5::File::open_read(kA);
    psi::hdf5::File out = psi::hdf5::File::create(b);
    out.write_bf16("/steps/1/latent_video", a.read_bf16("/stage1/latent"));
    out.commit();
  }
  Outcome r = run_psi("compare " + kA + " " + b + " --only latent --map 'stage*/latent=steps/*/latent_video'");
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("summary: 1 compared (1 bitwise equal, 0 differ)"), std::string::npos) << r.out;
  r = run_psi("compare " + kA + " " + b + " --map 'stage*/latent=steps/latent_video'");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("psi: error: --map 'stage*/latent=steps/latent_video': FROM has 1 '*' and TO 0"), std::string::npos)
      << r.out;
  std::filesystem::remove(b);
}
