// psi run options that an experiment cannot honour are refused (exit 2, one line naming the
// option and why) instead of being ignored, and a report records the config and seed the run
// computed with: the experiments on recordings take the recording's.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <limits>
#include <map>
#include <string>
#include <tuple>

#include "engine/error.h"
#include "engine/measure/budget.h"
#include "experiments/experiment.h"
#include "hdf5/h5.h"
#include "hdf5/state_file.h"
#include "tests/psi_command.h"
#include "tests/recordings.h"

namespace fs = std::filesystem;
using namespace psi;

namespace {

const fs::path kRef = psi::test::reference_dir();

using psi::testing::Outcome;
using psi::testing::slurp;

class RunOptions : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("psi_run_options_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  Outcome psi(const std::string& args) const { return psi::testing::run_psi_in(args, dir_); }

  // A reference folder holding a copy of `name` whose root synthinit_global_seed is `seed`.
  fs::path reference_with_seed(const std::string& name, std::int64_t seed) const {
    const fs::path ref = dir_ / "reference";
    fs::create_directories(ref);
    fs::copy_file(kRef / name, ref / name);
    fs::permissions(ref / name, fs::perms::owner_read | fs::perms::owner_write, fs::perm_options::add);
    const hid_t f = H5Fopen((ref / name).c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    EXPECT_GE(f, 0);
    EXPECT_GE(H5Adelete(f, "synthinit_global_seed"), 0);
    const hid_t space = H5Screate(H5S_SCALAR);
    const hid_t a = H5Acreate2(f, "synthinit_global_seed", H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT);
    EXPECT_GE(H5Awrite(a, H5T_NATIVE_INT64, &seed), 0);
    H5Aclose(a);
    H5Sclose(space);
    H5Fclose(f);
    return ref;
  }

  // The refusal contract: exit 2, one stderr line naming `mention`, no report left.
  void expect_refused(const std::string& args, const std::string& mention) const {
    const fs::path report = dir_ / "refused.h5";
    const Outcome r = psi("run " + args + " --out " + report.string());
    EXPECT_EQ(r.status, 2) << args << "\n" << r.out << r.err;
    EXPECT_EQ(r.err.find("psi: error: "), 0u) << args << ": " << r.err;
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << args << ": " << r.err;
    EXPECT_NE(r.err.find(mention), std::string::npos) << args << ": " << r.err;
    EXPECT_FALSE(fs::exists(report)) << args;
  }

  fs::path dir_;
};

}  // namespace

TEST_F(RunOptions, OptionsTheExperimentsOnRecordingsCannotHonourAreRefused) {
  expect_refused("block-controls --seed 5", "--seed 5: block-controls computes on block_small.h5, recorded with SynthInit seed 0");
  expect_refused("block-controls --model tiny", "--model tiny --profile ltx25: block-controls has no recorded block");
  expect_refused("block-controls --model huge", "unknown model config 'huge'");
  expect_refused("block-controls --checkpoint " + (dir_ / "w.safetensors").string(), "--checkpoint does not apply");
  expect_refused("probes --model tiny", "--model tiny: probes computes the recorded ltx2-22b tensors");
  expect_refused("probes --seed 1", "--seed 1: probes computes on probes_linear.h5");
  expect_refused("probes --profile ltx2", "--profile ltx2: probes");
  expect_refused("projection-oracle --model small", "--model small: projection-oracle");
  expect_refused("projection-oracle --model huge", "unknown model config 'huge'");
  expect_refused("scheduling --model huge", "unknown model config 'huge'");
  expect_refused("capacity --zero-mask", "--zero-mask applies only to full-prompt");
}

// An experiment's own options are declared by that experiment alone (the CLI offers them from
// the registry and refuses them elsewhere), and the report's record of the options reads back.
TEST_F(RunOptions, EachExperimentDeclaresItsOwnOptions) {
  std::map<std::string, std::string> owner;
  for (const exp::Experiment& e : exp::experiments())
    for (const exp::ExperimentOption& opt : e.options) EXPECT_TRUE(owner.emplace(opt.flag, e.name).second) << opt.flag;
  EXPECT_EQ(owner, (std::map<std::string, std::string>{{"--zero-mask", "full-prompt"},
                                                       {"--pool", "fixed-budget"},
                                                       {"--row-tile", "scheduling"},
                                                       {"--capture", "one-token"}}));
  expect_refused("scheduling --capture c.h5", "--capture applies only to one-token (not scheduling)");
  expect_refused("fixed-budget --row-tile fit", "--row-tile applies only to scheduling (not fixed-budget)");
  expect_refused("scheduling --pool 1GiB", "--pool applies only to fixed-budget (not scheduling)");
  expect_refused("one-token --zero-mask", "--zero-mask applies only to full-prompt (not one-token)");

  exp::Options o;
  o.model = "small";
  o.seed = 7;
  o.shard_index = 1;
  o.shard_count = 3;
  for (const auto& [experiment, flag, value] : {std::tuple{"fixed-budget", "--pool", "1GiB"},
                                                 std::tuple{"scheduling", "--row-tile", "fit"},
                                                 std::tuple{"full-prompt", "--zero-mask", ""},
                                                 std::tuple{"one-token", "--capture", "c.h5"}})
    exp::find_experiment(experiment).options.at(0).apply(value, o);
  EXPECT_EQ(o.to_json()["pool_bytes"], 1 << 30);
  EXPECT_EQ(o.to_json()["row_tile"], -1);
  EXPECT_EQ(o.to_json()["zero_mask"], true);
  EXPECT_EQ(o.to_json()["capture"], "c.h5");
  EXPECT_EQ(exp::Options::from_json(o.to_json()).to_json(), o.to_json());
  // A record from before the experiments' own options: their defaults.
  nlohmann::json old = o.to_json();
  for (const char* k : {"zero_mask", "pool_bytes", "row_tile", "capture"}) old.erase(k);
  const exp::Options back = exp::Options::from_json(old);
  EXPECT_EQ(back.model, "small");
  EXPECT_EQ(back.shard_count, 3);
  EXPECT_EQ(back.to_json()["zero_mask"], false);
  EXPECT_EQ(back.to_json()["capture"], "");
  EXPECT_EQ(back.to_json()["pool_bytes"], rt::kDefaultPoolBytes);
  EXPECT_EQ(back.to_json()["row_tile"], 0);
  // A key psi does not write is refused, not read as absent.
  nlohmann::json misspelt = o.to_json();
  misspelt["row_tiles"] = 4;
  EXPECT_THROW(
      {
        try {
          exp::Options::from_json(misspelt);
        } catch (const Error& e) {
          EXPECT_STREQ(e.what(), "unknown key 'row_tiles' (not one psi writes)");
          throw;
        }
      },
      Error);
}

// A seed, chaos seed or shard that is not the integer psi writes is refused naming it: nlohmann
// would read 1.5 as 1, "7" and true as numbers and wrap -1 into 2^64 - 1, and a re-rendered or
// merged report would then claim a run that never happened.
TEST_F(RunOptions, IntegerOptionsAreIntegersInRange) {
  exp::Options o;
  o.shard_count = 3;
  const nlohmann::json written = o.to_json();
  const std::tuple<const char*, nlohmann::json, std::string> bad[] = {
      {"seed", 1.5, "seed 1.5 is not what psi writes (an integer)"},
      {"seed", -1, "seed -1 is not what psi writes (an integer from 0 to 2^64 - 1)"},
      {"seed", "7", "seed \"7\" is not what psi writes (an integer)"},
      {"chaos_seed", true, "chaos_seed true is not what psi writes (an integer)"},
      {"chaos_seed", 2.0, "chaos_seed 2.0 is not what psi writes (an integer)"},
      {"shard_count", 1.0, "shard_count 1.0 is not what psi writes (an integer)"},
      {"shard_count", 0, "shard_count 0 is not what psi writes (an integer from 1 to 2147483647)"},
      {"shard_index", 3, "shard_index 3 is not what psi writes (an integer from 0 to 2)"},
      {"shard_index", -1, "shard_index -1 is not what psi writes (an integer from 0 to 2)"},
  };
  for (const auto& [key, value, message] : bad) {
    nlohmann::json j = written;
    j[key] = value;
    try {
      exp::Options::from_json(j);
      ADD_FAILURE() << key << " " << value.dump() << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()), message);
    }
  }
  nlohmann::json top = written;
  top["seed"] = std::numeric_limits<std::uint64_t>::max();
  top["shard_index"] = 2;
  const exp::Options back = exp::Options::from_json(top);
  EXPECT_EQ(back.seed, std::numeric_limits<std::uint64_t>::max());
  EXPECT_EQ(back.shard_index, 2);
}

// The report records the config the recorded tensors are of and the recording's seed; a
// recording at another seed (7) settles the options to 7 and refuses --seed 0. (A copy with only
// its seed changed cannot be run: its weights no longer match weights_json.)
TEST_F(RunOptions, ProjectionOracleRecordsTheRecordingsSeedAndConfig) {
  const fs::path report = dir_ / "oracle.h5";
  const Outcome r = psi("run projection-oracle --model ltx2-22b --seed 0 --out " + report.string());
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  const hdf5::StateReader reader(report);
  EXPECT_EQ(reader.run_info().seed, 0u);
  EXPECT_EQ(reader.run_info().model_config, "ltx2-22b/ltx25");

  const fs::path ref = reference_with_seed("probes_linear.h5", 7);
  exp::Options o;
  o.reference_dir = ref;
  exp::settle_options(exp::find_experiment("projection-oracle"), o);
  EXPECT_EQ(o.seed, 7u);
  EXPECT_EQ(o.to_json()["seed"], 7);
  expect_refused("projection-oracle --seed 0 --reference " + ref.string(), "recorded with SynthInit seed 7");
}

TEST_F(RunOptions, SettleChoosesTheRecordedConfigAndSeed) {
  const fs::path ref = reference_with_seed("probe_attn_traj.h5", 9);
  exp::Options o;
  o.reference_dir = ref;
  exp::settle_options(exp::find_experiment("one-token"), o);
  EXPECT_EQ(o.seed, 9u);  // one-token compares with the recording, so it computes with its seed
  EXPECT_EQ(o.model, "tiny");

  exp::Options given;
  given.reference_dir = ref;
  given.seed = 3;
  given.seed_given = true;
  exp::settle_options(exp::find_experiment("one-token"), given);
  EXPECT_EQ(given.seed, 3u);  // another seed: no comparison, computed at 3

  exp::Options other_model;
  other_model.reference_dir = ref;
  other_model.model = "small";
  other_model.model_given = true;
  exp::settle_options(exp::find_experiment("one-token"), other_model);
  EXPECT_EQ(other_model.seed, 0u);  // no recording of small: the default seed

  exp::Options block;
  exp::settle_options(exp::find_experiment("block-controls"), block);
  EXPECT_EQ(block.model, "small");  // the recorded block's config, whatever the default model is
  exp::Options full;
  full.model = "ltx2-22b";
  full.model_given = true;
  exp::settle_options(exp::find_experiment("block-controls"), full);
  EXPECT_EQ(full.model, "ltx2-22b");

  exp::Options probes;
  exp::settle_options(exp::find_experiment("probes"), probes);
  EXPECT_EQ(probes.model, "ltx2-22b");

  exp::Options sched;
  sched.seed = 11;
  sched.seed_given = true;
  exp::settle_options(exp::find_experiment("scheduling"), sched);
  EXPECT_EQ(sched.seed, 11u);
  EXPECT_EQ(sched.model, "tiny");
}
