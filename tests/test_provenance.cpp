// Provenance of what psi reads (issue 57, class 3; probes/provenance.h): a recording or capture
// whose declared seed, weights or step is not what psi regenerates or uses is refused with one
// psi: error: line naming both values (exit 2), never measured. The recordings are copied and
// the copies edited with the HDF5 C API, as another tool would edit them.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "hdf5/h5.h"  // the HDF5 C API: copies edited in place
#include "psi_command.h"
#include "tests/h5_edit.h"
#include "tests/recordings.h"

namespace {

namespace fs = std::filesystem;
using psi::testing::Outcome;
using psi::testing::run_psi_in;
using psi::testing::TempDir;
using psi::test::edit_h5;

fs::path copy_recording(const TempDir& d, const std::string& name) {
  const fs::path f = d / name;
  fs::copy_file(psi::test::reference_file(name), f, fs::copy_options::overwrite_existing);
  fs::permissions(f, fs::perms::owner_read | fs::perms::owner_write, fs::perm_options::add);
  return f;
}

void set_int_attr(hid_t file, const char* object, const char* name, std::int64_t value) {
  if (H5Aexists_by_name(file, object, name, H5P_DEFAULT) > 0) H5Adelete_by_name(file, object, name, H5P_DEFAULT);
  const hid_t space = H5Screate(H5S_SCALAR);
  const hid_t a = H5Acreate_by_name(file, object, name, H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  ASSERT_GE(a, 0) << object << " " << name;
  EXPECT_GE(H5Awrite(a, H5T_NATIVE_INT64, &value), 0);
  H5Aclose(a);
  H5Sclose(space);
}

void set_string_attr(hid_t file, const std::string& object, const char* name, const std::string& value) {
  if (H5Aexists_by_name(file, object.c_str(), name, H5P_DEFAULT) > 0)
    H5Adelete_by_name(file, object.c_str(), name, H5P_DEFAULT);
  const hid_t t = H5Tcopy(H5T_C_S1);
  H5Tset_size(t, H5T_VARIABLE);
  const hid_t space = H5Screate(H5S_SCALAR);
  const hid_t a = H5Acreate_by_name(file, object.c_str(), name, t, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  ASSERT_GE(a, 0) << object << " " << name;
  const char* p = value.c_str();
  EXPECT_GE(H5Awrite(a, t, &p), 0);
  H5Aclose(a);
  H5Sclose(space);
  H5Tclose(t);
}

// The text of a uint8 dataset rewritten by `change`, which keeps its length.
void edit_text(hid_t file, const std::string& dataset, const std::function<void(std::string&)>& change) {
  const hid_t d = H5Dopen2(file, dataset.c_str(), H5P_DEFAULT);
  ASSERT_GE(d, 0) << dataset;
  const hid_t space = H5Dget_space(d);
  std::string text(std::size_t(H5Sget_simple_extent_npoints(space)), '\0');
  H5Sclose(space);
  ASSERT_GE(H5Dread(d, H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, text.data()), 0);
  const std::size_t size = text.size();
  change(text);
  ASSERT_EQ(text.size(), size);
  EXPECT_GE(H5Dwrite(d, H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, text.data()), 0);
  H5Dclose(d);
}

// Exit 2 with one psi: error: line holding every one of `mentions`.
void expect_refused(const Outcome& r, const std::string& what, const std::vector<std::string>& mentions) {
  EXPECT_EQ(r.status, 2) << what << "\nstdout: " << r.out << "\nstderr: " << r.err;
  EXPECT_TRUE(r.err.starts_with("psi: error: ")) << what << ": " << r.err;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << what << ": not one line: " << r.err;
  for (const auto& m : mentions) EXPECT_NE(r.err.find(m), std::string::npos) << what << ": lacks '" << m << "': " << r.err;
}

const std::string kFfUpWeight = "transformer_blocks.0.audio_ff.net.0.proj.weight";
const std::string kFfUpSha = "17921627833f18dae1f3d12abc90caea7a42fae6e817ac159f673697f2480c3c";

// A recording whose synthinit_global_seed was changed: psi would regenerate other weights than
// the recorded run's (a relative L2 of 1.4 as a fidelity result). Its own synthinit_check names the
// seed the run used; without it, each weight's SHA-256 in weights_json does.
TEST(Provenance, ProbeOfARecordingOfAnotherSeedIsRefused) {
  const TempDir d("psi_provenance");
  const struct {
    std::string probe, file;
  } probes[] = {{"audio-ff-up", "probes_linear.h5"}, {"video-q-proj", "probes_linear.h5"},
                {"audio-self-attn", "probe_attn_traj.h5"}};
  for (const auto& p : probes) {
    const fs::path f = copy_recording(d, p.file);
    edit_h5(f, [](hid_t h) { set_int_attr(h, "/", "synthinit_global_seed", 1); });
    expect_refused(run_psi_in("probe " + p.probe + " --variant dense --reference " + f.string(), d.path()), p.probe,
                   {f.string(), "SynthInit seed 0 (root attribute synthinit_check)", "has 1"});
    edit_h5(f, [](hid_t h) { H5Adelete(h, "synthinit_check"); });
    expect_refused(run_psi_in("probe " + p.probe + " --variant dense --reference " + f.string(), d.path()),
                   p.probe + " without synthinit_check",
                   {f.string() + ":/", " declares transformer_blocks.0.", "(weights_json) with SHA-256 ",
                    "psi's SynthInit (seed 1, the file's synthinit_global_seed) gives "});
  }
  // A weights_json that records another hash than its seed gives: both hashes named.
  const fs::path f = copy_recording(d, "probes_linear.h5");
  edit_h5(f, [](hid_t h) {
    edit_text(h, "/probe_audio_ff_up/weights_json", [](std::string& t) { t.replace(t.find(kFfUpSha), 4, "0000"); });
  });
  expect_refused(run_psi_in("probe audio-ff-up --variant dense --reference " + f.string(), d.path()), "edited sha256",
                 {"declares " + kFfUpWeight + " (weights_json) with SHA-256 0000" + kFfUpSha.substr(4), "gives " + kFfUpSha});
  // The control: the copy as recorded is measured.
  const fs::path same = copy_recording(d, "probes_linear.h5");
  const Outcome ok = run_psi_in("probe video-q-proj --variant dense --reference " + same.string(), d.path());
  EXPECT_EQ(ok.status, 0) << ok.out << ok.err;
  EXPECT_NE(ok.out.find("names/shapes/SHA-256 equal to weights_json"), std::string::npos) << ok.out;
}

// The FLASH recording of the full block is the official implementation's own control: it must have
// run the MATH recording's weights. A copy whose weights_json records another hash for one weight is
// refused before anything is computed, naming the weight, both hashes and both files.
TEST(Provenance, FlashRecordingOfOtherWeightsIsRefused) {
  const TempDir d("psi_provenance_flash");
  const fs::path math = copy_recording(d, "block_full_math.h5"), flash = copy_recording(d, "block_full_flash.h5");
  const std::string sha = "65fe9f097242cc8b8f0524ac8d776cc00f7561d04534fbbc5ee034d7074aa292";
  edit_h5(flash, [&](hid_t h) {
    edit_text(h, "/block_full_first/weights_json", [&](std::string& t) { t.replace(t.find(sha), 4, "0000"); });
  });
  expect_refused(run_psi_in("probe block-full --variant dense --reference " + math.string() + " --flash-reference " +
                                flash.string(),
                            d.path()),
                 "flash weights_json",
                 {math.string() + ":/block_full_first declares transformer_blocks.0.scale_shift_table (weights_json) "
                  "with SHA-256 " + sha,
                  "the FLASH recording " + flash.string() + ":/block_full_first gives 0000" + sha.substr(4)});
}

// The oracle's probe operands (psi oracle certify --probe) are regenerated the same way and held
// to the same check.
TEST(Provenance, OracleProbeOfAnotherSeedIsRefused) {
  const TempDir d("psi_provenance_oracle");
  const fs::path f = copy_recording(d, "probes_linear.h5");
  edit_h5(f, [](hid_t h) { set_int_attr(h, "/", "synthinit_global_seed", 1); });
  const std::string certify = "oracle certify --file " + f.string() + " --probe probe_video_q_proj";
  expect_refused(run_psi_in(certify, d.path()), "oracle", {f.string(), "SynthInit seed 0 (root attribute synthinit_check)", "has 1"});
  edit_h5(f, [](hid_t h) { H5Adelete(h, "synthinit_check"); });
  expect_refused(run_psi_in(certify, d.path()), "oracle without synthinit_check",
                 {f.string() + ":/probe_video_q_proj declares transformer_blocks.0.attn1.to_q.weight (weights_json) with SHA-256 ",
                  "psi's SynthInit (seed 1, the file's synthinit_global_seed) gives "});
}

// The tiny trajectory's readers (psi kernels, psi run one-token) draw the contexts and noise
// themselves with the file's seed: the recorded inputs' SHA-256 must be what that seed gives.
TEST(Provenance, TrajectoryOfAnotherSeedIsRefused) {
  const TempDir d("psi_provenance_traj");
  const fs::path f = copy_recording(d, "probe_attn_traj.h5");
  edit_h5(f, [](hid_t h) { set_int_attr(h, "/", "synthinit_global_seed", 1); });
  expect_refused(run_psi_in("kernels shapes --reference " + d.path().string(), d.path()), "seed",
                 {f.string(), "SynthInit seed 0 (root attribute synthinit_check)", "has 1"});
  edit_h5(f, [](hid_t h) { H5Adelete(h, "synthinit_check"); });
  expect_refused(run_psi_in("kernels shapes --reference " + d.path().string(), d.path()), "seed, no synthinit_check",
                 {f.string(), "declares input.trajectory_tiny.", "with SHA-256 ", "(seed 1, the file's synthinit_global_seed) gives "});
  expect_refused(run_psi_in("run one-token --quick --reference " + d.path().string() + " --out " + (d / "r.h5").string(),
                            d.path()),
                 "one-token", {f.string(), "declares input.trajectory_tiny."});
  EXPECT_FALSE(fs::exists(d / "r.h5"));
}

// A per-operator capture replayed on a recording it does not declare (another seed, model or
// state) would be reported as departing operators: refused naming both values.
TEST(Provenance, CaptureOfAnotherSeedOrStepIsRefused) {
  const TempDir d("psi_provenance_capture");
  const fs::path capture = d / "step1.h5";
  const Outcome made = run_psi_in("kernels where --step 1 --capture " + capture.string(), d.path());
  ASSERT_EQ(made.status, 0) << made.out << made.err;
  const struct {
    std::string name;
    std::function<void(hid_t)> change;
    std::vector<std::string> mentions;
  } edits[] = {
      {"seed", [](hid_t h) { set_int_attr(h, "/", "seed", 1); },
       {"declares SynthInit seed 1 (root attribute seed), but the recording it replays on", "probe_attn_traj.h5 has 0"}},
      {"model", [](hid_t h) { set_string_attr(h, "/", "model_config", "small"); },
       {"declares model configuration small (root attribute model_config)", "has tiny"}},
      {"state", [](hid_t h) { set_string_attr(h, "/trajectory_tiny_ops/step_01", "state", "02_stage1_step2"); },
       {"declares state 02_stage1_step2", "has 01_stage1_step1"}},
  };
  for (const auto& e : edits) {
    const fs::path f = d / (e.name + ".h5");
    fs::copy_file(capture, f, fs::copy_options::overwrite_existing);
    edit_h5(f, e.change);
    std::vector<std::string> mentions = e.mentions;
    mentions.push_back(f.string());
    expect_refused(run_psi_in("probe trajectory-step --reference " + f.string() + " --step 1", d.path()), e.name, mentions);
  }
}

}  // namespace
