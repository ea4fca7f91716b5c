// The Slurm job array of docs/gpu-and-cluster.md, submitted for real: each test starts a
// single-node cluster of its own (scripts/slurm/local-cluster.sh: munged, slurmctld and slurmd in
// a scratch folder, as this user), runs the page's commands against scripts/slurm/psi-array.sbatch
// with only what differs on a CPU set in the environment, and stops the cluster afterwards — also
// when the test fails or dies, through the script's watchdog on this process. A machine where the
// cluster cannot start fails here with the reason; nothing is skipped.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/psi_command.h"
#include "tests/readme_blocks.h"

namespace fs = std::filesystem;
using psi::testing::file_text;
using psi::testing::Outcome;

namespace {

const fs::path kSource = fs::path(PSI_TEST_DATA).parent_path().parent_path();

std::string quoted(const fs::path& p) { return "'" + p.string() + "'"; }

// What the documented array needs to run on this machine's CPU instead of GPUs; everything else
// is the script's default.
const char* const kCpuEnvironment = "PSI_EXPERIMENT=probes PSI_BACKEND=cpu SBATCH_GRES=none";

class Slurm : public ::testing::Test {
 protected:
  void SetUp() override {
    // Short, as munge's socket path must fit a sockaddr_un.
    char tmpl[] = "/tmp/psi-slurm-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    work_ = dir_ / "work";
    fs::create_directories(work_ / "build");
    fs::create_directories(work_ / "scripts" / "slurm");
    // The folder a user submits from: psi's build and the script, as in a checkout.
    fs::create_symlink(PSI_BINARY, work_ / "build" / "psi");
    fs::create_symlink(kSource / "scripts" / "slurm" / "psi-array.sbatch", work_ / "scripts" / "slurm" / "psi-array.sbatch");
    const Outcome up = shell("bash " + quoted(kSource / "scripts" / "slurm" / "local-cluster.sh") + " start " +
                             quoted(dir_ / "cluster") + " " + std::to_string(::getpid()));
    ASSERT_EQ(up.status, 0) << "the single-node Slurm cluster did not start:\n" << up.err << up.out;
    started_ = true;
  }

  void TearDown() override {
    if (started_) {
      const Outcome down = shell("bash " + quoted(kSource / "scripts" / "slurm" / "local-cluster.sh") + " stop " +
                                 quoted(dir_ / "cluster"));
      EXPECT_EQ(down.status, 0) << down.err;
    }
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  // A bash script run in the submission folder against this test's cluster.
  Outcome shell(const std::string& script) const {
    const fs::path file = dir_ / "step.sh";
    std::ofstream(file) << "set -euo pipefail\nexport SLURM_CONF=" << quoted(dir_ / "cluster" / "slurm.conf") << " "
                        << kCpuEnvironment << "\n"
                        << script << "\n";
    const std::string cmd = "cd " + quoted(work_) + " && bash " + quoted(file) + " >" + quoted(dir_ / "step.out") +
                            " 2>" + quoted(dir_ / "step.err");
    const int st = std::system(cmd.c_str());
    return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, file_text(dir_ / "step.out"), file_text(dir_ / "step.err")};
  }

  // Waits until the queue is empty: every job submitted has ended.
  void wait_for_the_queue() const {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(4);
    while (std::chrono::steady_clock::now() < deadline) {
      const Outcome q = shell("squeue -h -o '%i %T %r'");
      ASSERT_EQ(q.status, 0) << q.err;
      if (q.out.empty()) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
    FAIL() << "jobs still queued after 4 minutes:\n"
           << shell("squeue").out << file_text(dir_ / "cluster" / "log" / "slurmctld.log");
  }

  // Every log the jobs wrote, for a failure message.
  std::string job_logs() const {
    std::string s;
    for (const auto& e : fs::directory_iterator(work_))
      if (e.path().extension() == ".log") s += "--- " + e.path().filename().string() + "\n" + file_text(e.path());
    return s;
  }

  fs::path dir_, work_;
  bool started_ = false;
};

std::string readme_slurm_block() {
  for (const auto& b : psi::testing::readme_blocks())
    if (b.directive == "slurm") {
      std::string s;
      for (const auto& l : b.body) s += l + "\n";
      return s;
    }
  return "";
}

// The page's two lines as written: the nine-task array, then the merge queued behind it. The
// merged report holds exactly what one unsharded run writes.
TEST_F(Slurm, ReadmeArrayMergedEqualsOneRun) {
  const std::string block = readme_slurm_block();
  ASSERT_FALSE(block.empty()) << "no checked document has a <!-- readme-test: slurm --> block";
  const Outcome submitted = shell(block);
  ASSERT_EQ(submitted.status, 0) << block << submitted.err;
  wait_for_the_queue();
  for (int i = 0; i < 9; ++i)
    EXPECT_TRUE(fs::is_regular_file(work_ / "cohort" / ("shard" + std::to_string(i) + ".h5"))) << i << job_logs();
  ASSERT_TRUE(fs::is_regular_file(work_ / "cohort" / "merged.h5")) << job_logs();

  const Outcome single = shell("build/psi run probes --backend cpu --out single.h5");
  ASSERT_EQ(single.status, 0) << single.err;
  const Outcome same = shell("build/psi compare cohort/merged.h5 single.h5");
  EXPECT_EQ(same.status, 0) << same.out << same.err;
}

// One shard given a bad option fails its task; the merge queued behind the array refuses,
// naming that shard, and writes nothing.
TEST_F(Slurm, AFailedShardIsNamedByTheMerge) {
  const Outcome submitted = shell(
      "export PSI_SHARDS=3\n"
      "a=$(sbatch --parsable --array=0,2 scripts/slurm/psi-array.sbatch)\n"
      "b=$(PSI_ARGS=--no-such-option sbatch --parsable --array=1 scripts/slurm/psi-array.sbatch)\n"
      "sbatch --dependency=afterany:$a:$b --output=psi-merge.log "
      "--wrap 'build/psi merge cohort/shard*.h5 --out cohort/merged.h5'\n");
  ASSERT_EQ(submitted.status, 0) << submitted.err;
  wait_for_the_queue();
  EXPECT_TRUE(fs::is_regular_file(work_ / "cohort" / "shard0.h5")) << job_logs();
  EXPECT_FALSE(fs::exists(work_ / "cohort" / "shard1.h5")) << job_logs();
  EXPECT_TRUE(fs::is_regular_file(work_ / "cohort" / "shard2.h5")) << job_logs();
  const std::string merge_log = file_text(work_ / "psi-merge.log");
  EXPECT_NE(merge_log.find("shard 1/3 missing (2 of 3 given)"), std::string::npos) << job_logs();
  EXPECT_FALSE(fs::exists(work_ / "cohort" / "merged.h5"));
  // The failed task's log says why.
  EXPECT_NE(job_logs().find("--no-such-option"), std::string::npos) << job_logs();
}

}  // namespace
