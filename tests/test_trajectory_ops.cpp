// The per-operator capture and its replay (experiments/trajectory_ops.h, `psi kernels where
// --capture`, `psi probe trajectory-step`): psi's own capture of a teacher-forced step replays
// with no departure; one ulp planted in one operator's output (its sha256_full made to match, as
// a recording where that kernel rounded differently would carry it) is named the first
// departing operator and no other departs; the same ulp changed inside the forward, so that
// every later operator runs on what it changed, is named, and the operators downstream are
// inherited; inputs that no recorded operator before explains are put on an operator between
// the recorded ones; a capture with a bad hash, a missing site, another shape, an unknown site or
// another step is refused (exit 2).
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "engine/official/op_observer.h"
#include "engine/sha256.h"
#include "hdf5/h5.h"  // the HDF5 C API: captures edited in place
#include "experiments/kernel_search.h"
#include "experiments/trajectory_ops.h"
#include "psi_command.h"
#include "tests/recordings.h"

namespace {

namespace fs = std::filesystem;
using psi::testing::run_psi_in;

const std::string kGroup = "/trajectory_tiny_ops/step_01";

struct Dir {
  fs::path path;
  Dir() {
    static int made = 0;
    path = fs::temp_directory_path() / ("psi_trajectory_ops_" + std::to_string(::getpid()) + "_" + std::to_string(made++));
    fs::create_directories(path);
  }
  ~Dir() { fs::remove_all(path); }
};

// psi's capture of step 1 (one-token context), written once for the whole program.
const fs::path& capture() {
  static Dir dir;
  static const fs::path file = [] {
    const fs::path f = dir.path / "step1.h5";
    const auto r = run_psi_in("kernels where --step 1 --capture " + f.string(), dir.path);
    EXPECT_EQ(r.status, 0) << r.out << r.err;
    EXPECT_NE(r.out.find("capture: "), std::string::npos) << r.out;
    return f;
  }();
  return file;
}

fs::path copy_of_capture(const Dir& d, const std::string& name) {
  const fs::path f = d.path / name;
  fs::copy_file(capture(), f, fs::copy_options::overwrite_existing);
  fs::permissions(f, fs::perms::owner_read | fs::perms::owner_write, fs::perm_options::add);
  return f;
}

// A string attribute replaced (deleted and written anew: HDF5 1.10 cannot rewrite a variable-
// length string attribute of a group in place).
void set_string_attr(hid_t file, const std::string& object, const char* name, const std::string& value) {
  ASSERT_GE(H5Adelete_by_name(file, object.c_str(), name, H5P_DEFAULT), 0) << object << " " << name;
  const hid_t t = H5Tcopy(H5T_C_S1);
  H5Tset_size(t, H5T_VARIABLE);
  H5Tset_cset(t, H5T_CSET_UTF8);
  const hid_t space = H5Screate(H5S_SCALAR);
  const hid_t a = H5Acreate_by_name(file, object.c_str(), name, t, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  ASSERT_GE(a, 0);
  const char* p = value.c_str();
  EXPECT_GE(H5Awrite(a, t, &p), 0);
  H5Aclose(a);
  H5Sclose(space);
  H5Tclose(t);
}

// Element `index` of `dataset` one BF16 ulp further from zero; with `fix_hash` its sha256_full
// is made to match the new data.
void plant_ulp(const fs::path& file, const std::string& dataset, std::size_t index, bool fix_hash) {
  const hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(f, 0) << file;
  const hid_t d = H5Dopen2(f, dataset.c_str(), H5P_DEFAULT);
  ASSERT_GE(d, 0) << dataset;
  const hid_t space = H5Dget_space(d);
  std::vector<std::uint16_t> v(std::size_t(H5Sget_simple_extent_npoints(space)));
  ASSERT_GE(H5Dread(d, H5T_NATIVE_UINT16, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()), 0);
  ASSERT_LT(index, v.size());
  ASSERT_NE(v[index] & 0x7f80, 0x7f80) << "not a finite element";
  v[index] = std::uint16_t(v[index] + 1);
  ASSERT_GE(H5Dwrite(d, H5T_NATIVE_UINT16, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()), 0);
  H5Sclose(space);
  H5Dclose(d);
  if (fix_hash) set_string_attr(f, dataset, "sha256_full", psi::sha256_hex(v.data(), v.size() * sizeof(std::uint16_t)));
  H5Fclose(f);
}

void edit(const fs::path& file, const std::function<void(hid_t)>& fn) {
  const hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(f, 0) << file;
  fn(f);
  H5Fclose(f);
}

psi::exp::StepReplay replay(const fs::path& file) { return psi::exp::replay_step(file, 1, psi::test::reference_dir()); }

std::vector<std::string> verdicts(const psi::exp::StepReplay& r) {
  std::vector<std::string> v;
  for (const auto& op : r.ops) v.push_back(op.departs() ? "departs" : op.inherited() ? "inherited" : "equal");
  return v;
}

int index_of(const psi::exp::StepReplay& r, const std::string& site) {
  for (std::size_t i = 0; i < r.ops.size(); ++i)
    if (r.ops[i].site == site) return int(i);
  ADD_FAILURE() << site << " not replayed";
  return -1;
}

TEST(TrajectoryOps, OwnCaptureReplaysWithoutDeparture) {
  const Dir d;
  const auto r = run_psi_in("probe trajectory-step --reference " + capture().string() + " --step 1", d.path);
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("\nno operator departs\n"), std::string::npos) << r.out;
  const psi::exp::StepReplay rep = replay(capture());
  // Every product and attention core of both blocks and of the model level, in forward order.
  ASSERT_GT(rep.ops.size(), 60u);
  EXPECT_EQ(rep.ops.front().site, "patchify_proj");
  EXPECT_EQ(rep.ops.back().site, "audio_proj_out");
  EXPECT_GE(index_of(rep, "transformer_blocks.1.video.attn1.sdpa"), 0);
  EXPECT_GE(index_of(rep, "transformer_blocks.0.audio.ff.down"), 0);
  for (const auto& op : rep.ops) {
    EXPECT_GT(op.elements, 0) << op.site;
    EXPECT_EQ(op.differing, 0) << op.site;
    EXPECT_EQ(op.inputs_differing, 0) << op.site;
  }
  EXPECT_FALSE(rep.any_departs());
}

// A recording in which one kernel rounded one element the other way: that operator, and only
// it, departs.
TEST(TrajectoryOps, PlantedUlpInOneOutputIsTheFirstDeparture) {
  const Dir d;
  for (const std::string site : {"transformer_blocks.0.video.attn1.to_q", "transformer_blocks.1.a2v.sdpa",
                                 "audio_adaln_single.linear", "audio_proj_out"}) {
    const fs::path f = copy_of_capture(d, "planted.h5");
    plant_ulp(f, kGroup + "/" + site + "/out", 37, true);
    const auto r = run_psi_in("probe trajectory-step --reference " + f.string() + " --step 1", d.path);
    EXPECT_EQ(r.status, 1) << site << "\n" << r.out << r.err;
    EXPECT_NE(r.out.find("\nfirst departing operator: " + site + "\n"), std::string::npos) << r.out;
    const psi::exp::StepReplay rep = replay(f);
    const int at = index_of(rep, site);
    EXPECT_EQ(rep.first_departing, at);
    EXPECT_FALSE(rep.unrecorded_first());
    for (std::size_t i = 0; i < rep.ops.size(); ++i) {
      EXPECT_EQ(rep.ops[i].differing, int(i) == at ? 1 : 0) << rep.ops[i].site;
      EXPECT_EQ(rep.ops[i].inputs_differing, 0) << rep.ops[i].site;
    }
    EXPECT_EQ(rep.ops[std::size_t(at)].ulps[0], 1);
  }
}

// A recording whose operator got other inputs than the recorded operators before it produced:
// an operator between them (here: the norm before to_q) departed, and the replay says so
// instead of blaming to_q.
TEST(TrajectoryOps, InputsThatNoRecordedOperatorExplainsAreNamedAsSuch) {
  const Dir d;
  const std::string site = "transformer_blocks.0.video.attn1.to_q";
  const fs::path f = copy_of_capture(d, "inputs.h5");
  plant_ulp(f, kGroup + "/" + site + "/in", 37, true);
  const auto r = run_psi_in("probe trajectory-step --reference " + f.string() + " --step 1", d.path);
  EXPECT_EQ(r.status, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("\nfirst departing operator: one outside the recorded ones, before " + site + " "),
            std::string::npos)
      << r.out;
  const psi::exp::StepReplay rep = replay(f);
  EXPECT_EQ(rep.first_inputs_differing, index_of(rep, site));
  EXPECT_TRUE(rep.unrecorded_first());
  EXPECT_EQ(rep.ops[std::size_t(index_of(rep, site))].inputs_differing, 1);
}

// Changes one element of one operator's output by one ulp inside the forward, before the
// forward goes on with it, and captures everything.
class Planting : public psi::official::OpObserver {
 public:
  explicit Planting(std::string site) : site_(std::move(site)) {}
  void product(const psi::official::ProductCall& c) override {
    if (c.site == site_) plant(c.y);
    capture.product(c);
  }
  void attention(const psi::official::AttentionCall& c) override {
    if (c.site == site_) plant(c.out);
    capture.attention(c);
  }
  psi::exp::OpCapture capture;

 private:
  static void plant(psi::Bf16Mat m) { m.at(0, 5) = psi::Bf16::from_bits(std::uint16_t(m.at(0, 5).bits + 1)); }
  std::string site_;
};

// The recording a device would make if that kernel rounded differently: the operator departs,
// every later operator runs on inputs that already differ and reproduces its output from them
// (inherited), and those before it are equal.
TEST(TrajectoryOps, ChangeInsideTheForwardIsNamedAndDownstreamIsInherited) {
  const Dir d;
  const psi::exp::TinyTrajectory t(psi::test::reference_dir(), 1);
  for (const std::string site : {"transformer_blocks.0.video.attn1.to_v", "transformer_blocks.1.video.attn1.sdpa"}) {
    Planting p(site);
    psi::exp::observed_step(t, 1, {}, p);
    const fs::path f = d.path / "changed.h5";
    psi::exp::write_capture(f, "trajectory_tiny", 1, t.state_name(1), t.seed(), p.capture.ops());
    const psi::exp::StepReplay rep = replay(f);
    const int at = index_of(rep, site);
    EXPECT_EQ(rep.first_departing, at) << site;
    EXPECT_FALSE(rep.unrecorded_first());
    const auto v = verdicts(rep);
    int inherited = 0;
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (int(i) < at) {
        EXPECT_EQ(v[i], "equal") << rep.ops[i].site;
      }
      if (int(i) > at) {
        EXPECT_NE(v[i], "departs") << rep.ops[i].site;
      }
      inherited += v[i] == "inherited";
    }
    EXPECT_EQ(v[std::size_t(at)], "departs");
    EXPECT_EQ(rep.ops[std::size_t(at)].differing, 1);
    // Its consumer (the attention core, the output projection) at least runs on the change.
    EXPECT_GE(inherited, 1) << site;
    const auto r = run_psi_in("probe trajectory-step --reference " + f.string() + " --step 1", d.path);
    EXPECT_EQ(r.status, 1) << r.out << r.err;
    EXPECT_NE(r.out.find("\nfirst departing operator: " + site + "\n"), std::string::npos) << r.out;
  }
}

// One problem per copy; each is exit 2 with one line naming it, and nothing on stdout's last line
// claims a verdict.
TEST(TrajectoryOps, BadCapturesAreRefused) {
  const Dir d;
  const std::string q = kGroup + "/transformer_blocks.0.video.attn1.to_q";
  struct Case {
    std::string name, mention;
    std::function<void(const fs::path&)> make;
    int step = 1;
  };
  const std::vector<Case> cases{
      {"hash", "does not match its sha256_full", [&](const fs::path& f) { plant_ulp(f, q + "/out", 3, false); }},
      {"missing", "missing",
       [&](const fs::path& f) { edit(f, [&](hid_t h) { ASSERT_GE(H5Ldelete(h, (q + "/in").c_str(), H5P_DEFAULT), 0); }); }},
      {"shape", "shape [72, 256, 128]",
       [&](const fs::path& f) {
         edit(f, [&](hid_t h) { set_string_attr(h, q, "shape", "[72, 256, 128]"); });
       }},
      {"unknown", "video.attn1.to_q is not an operator of psi's forward",
       [&](const fs::path& f) {
         edit(f, [&](hid_t h) {
           ASSERT_GE(H5Lmove(h, q.c_str(), h, (kGroup + "/video.attn1.to_q").c_str(), H5P_DEFAULT, H5P_DEFAULT), 0);
         });
       }},
      {"step", "no /trajectory_tiny_ops/step_02", [](const fs::path&) {}, 2},
  };
  for (const Case& c : cases) {
    const fs::path f = copy_of_capture(d, c.name + ".h5");
    c.make(f);
    const auto r = run_psi_in("probe trajectory-step --reference " + f.string() + " --step " + std::to_string(c.step), d.path);
    EXPECT_EQ(r.status, 2) << c.name << "\n" << r.out << r.err;
    EXPECT_EQ(r.err.rfind("psi: error: ", 0), 0u) << c.name << ": " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << c.name << ": " << r.err;
    EXPECT_NE(r.err.find(c.mention), std::string::npos) << c.name << ": " << r.err;
    EXPECT_EQ(r.out.find("operator departs"), std::string::npos) << c.name;
  }
}

}  // namespace

// The capture as the issue asks for it, from `psi run one-token --quick --capture`: the same
// operators, bit for bit, as `psi kernels where --capture` writes, and a replay in which no
// operator departs. A run that does not compute the recorded trajectory refuses --capture.
TEST(TrajectoryOps, OneTokenRunWritesTheCapture) {
  Dir dir;
  const fs::path f = dir.path / "run_capture.h5";
  const auto run = run_psi_in("run one-token --quick --capture " + f.string() + " --out " + (dir.path / "r.h5").string(),
                              dir.path);
  ASSERT_EQ(run.status, 0) << run.err;
  const auto cmp = run_psi_in("compare " + capture().string() + " " + f.string() + " --only ^/trajectory_tiny_ops/", dir.path);
  EXPECT_EQ(cmp.status, 0) << cmp.out << cmp.err;
  const auto rep = run_psi_in("probe trajectory-step --reference " + f.string() + " --step 1", dir.path);
  EXPECT_EQ(rep.status, 0) << rep.out << rep.err;
  EXPECT_NE(rep.out.find("no operator departs"), std::string::npos) << rep.out;
  const auto small = run_psi_in("run one-token --quick --model small --capture " + (dir.path / "s.h5").string() +
                                    " --out " + (dir.path / "s_report.h5").string(),
                                dir.path);
  EXPECT_EQ(small.status, 2) << small.out << small.err;
  EXPECT_NE(small.err.find("--capture writes the recorded tiny ltx25 trajectory's step"), std::string::npos) << small.err;
  EXPECT_FALSE(fs::exists(dir.path / "s.h5"));
}
