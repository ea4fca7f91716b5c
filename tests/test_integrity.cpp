// sha256_full verification (hdf5/schema.h check_sha256_full): psi compare marks a dataset
// whose data no longer matches its recorded hash as corrupt (exit 2, naming file and dataset),
// and the recording reader refuses such a recording instead of computing with it.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/error.h"
#include "compare/compare.h"
#include "hdf5/h5.h"
#include "hdf5/schema.h"
#include "hdf5/state_file.h"
#include "probes/recording.h"
#include "tests/psi_command.h"
#include "tests/recordings.h"

namespace fs = std::filesystem;
using namespace psi;
using namespace psi::hdf5;
using namespace psi::compare;

namespace {

class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("psi_test_integrity_" + std::string(info->name()) + "_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  ~TempDir() { fs::remove_all(dir_); }
  fs::path operator/(const std::string& name) const { return dir_ / name; }

 private:
  fs::path dir_;
};

const fs::path kRef = psi::test::reference_dir();

using psi::testing::Outcome;
using psi::testing::run_psi_in;

// Flips the lowest bit of the first element of `dataset` in place, attributes untouched: what
// a bit rot or an edit by another tool does.
void flip_first_bit(const fs::path& file, const std::string& dataset) {
  fs::permissions(file, fs::perms::owner_read | fs::perms::owner_write, fs::perm_options::add);
  const hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(f, 0) << file;
  const hid_t d = H5Dopen2(f, dataset.c_str(), H5P_DEFAULT);
  ASSERT_GE(d, 0) << dataset;
  const hid_t type = H5Dget_type(d), space = H5Dget_space(d);
  std::vector<unsigned char> bytes(std::size_t(H5Sget_simple_extent_npoints(space)) * H5Tget_size(type));
  ASSERT_GE(H5Dread(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, bytes.data()), 0);
  bytes.at(0) ^= 1;
  ASSERT_GE(H5Dwrite(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, bytes.data()), 0);
  H5Tclose(type);
  H5Sclose(space);
  H5Dclose(d);
  H5Fclose(f);
}

Bf16Tensor ramp(Shape s) {
  Bf16Tensor t(std::move(s));
  for (std::int64_t i = 0; i < t.numel(); ++i) t.data[i] = bf16_rne(float(i % 13) * 0.25f - 1.0f);
  return t;
}

void write_report(const fs::path& p) {
  StateWriter w(p, RunInfo{});
  w.write("g/whole", ramp({2, 4, 3}), {"dense", "[2, 4, 3]", "", {}});
  w.write_rows("g/rows", ramp({1, 8, 3}), 1, 0, 3, {"dense", "[1, 8, 3]", "", {}});
  w.commit();
}

}  // namespace

TEST(Sha256Full, CheckSaysWhatCouldBeVerified) {
  TempDir dir;
  write_report(dir / "r.h5");
  {
    auto f = hdf5::File::create(dir / "plain.h5");
    f.write_bf16("x", ramp({4}));
    f.commit();
  }
  const auto r = hdf5::File::open_read(dir / "r.h5");
  const Bf16Tensor whole = r.read_bf16("/g/whole"), rows = r.read_bf16("/g/rows");
  EXPECT_EQ(check_sha256_full(r, "/g/whole", whole.ptr(), whole.bytes()), Sha256Check::match);
  EXPECT_EQ(check_sha256_full(r, "/g/rows", rows.ptr(), rows.bytes()), Sha256Check::not_whole);
  const auto plain = hdf5::File::open_read(dir / "plain.h5");
  const Bf16Tensor x = plain.read_bf16("/x");
  EXPECT_EQ(check_sha256_full(plain, "/x", x.ptr(), x.bytes()), Sha256Check::not_recorded);

  Bf16Tensor changed = whole;
  changed.data[5].bits ^= 1;
  EXPECT_EQ(check_sha256_full(r, "/g/whole", changed.ptr(), changed.bytes()), Sha256Check::mismatch);
  try {
    verify_sha256_full(r, "/g/whole", changed);
    FAIL() << "a mismatch must throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Exit::bad_input);
    EXPECT_NE(std::string(e.what()).find((dir / "r.h5").string() + ":/g/whole: data does not match its sha256_full"),
              std::string::npos)
        << e.what();
  }
  EXPECT_NO_THROW(verify_sha256_full(r, "/g/whole", whole));
}

TEST(Sha256Full, CompareMarksACorruptDatasetAndExitsTwo) {
  TempDir dir;
  write_report(dir / "a.h5");
  write_report(dir / "b.h5");
  {
    const auto clean = compare_files(dir / "a.h5", dir / "b.h5");
    EXPECT_EQ(clean.exit_code(), 0);
    for (const auto& d : clean.datasets) {
      if (d.path_a != "/g/whole") continue;
      EXPECT_TRUE(d.sha256_checked_a && d.sha256_checked_b);
    }
  }
  flip_first_bit(dir / "b.h5", "/g/whole");
  const auto r = compare_files(dir / "a.h5", dir / "b.h5");
  bool seen = false;
  for (const auto& d : r.datasets)
    if (d.path_a == "/g/whole") {
      seen = true;
      EXPECT_EQ(d.status, CompareStatus::corrupt);
    }
  EXPECT_TRUE(seen);
  EXPECT_EQ(r.exit_code(), 2);
  ASSERT_EQ(r.errors().size(), 1u);
  EXPECT_NE(r.errors()[0].find((dir / "b.h5").string() + ":/g/whole: data does not match its sha256_full"),
            std::string::npos)
      << r.errors()[0];
  EXPECT_EQ(r.errors()[0].find((dir / "a.h5").string()), std::string::npos) << r.errors()[0];

  const Outcome cli = run_psi_in("compare " + (dir / "a.h5").string() + " " + (dir / "b.h5").string(), dir / "");
  EXPECT_EQ(cli.status, 2) << cli.out << cli.err;
  EXPECT_EQ(cli.err, "psi: error: " + r.errors()[0] + "\n");
  EXPECT_NE(cli.out.find("corrupt"), std::string::npos) << cli.out;
}

// A dataset stored only in part cannot be checked; changing it is an ordinary difference.
TEST(Sha256Full, CompareOfStoredRowsIsNotChecked) {
  TempDir dir;
  write_report(dir / "a.h5");
  write_report(dir / "b.h5");
  flip_first_bit(dir / "b.h5", "/g/rows");
  const auto r = compare_files(dir / "a.h5", dir / "b.h5");
  for (const auto& d : r.datasets)
    if (d.path_a == "/g/rows") {
      EXPECT_EQ(d.status, CompareStatus::differs);
      EXPECT_FALSE(d.sha256_checked_b);
    }
  EXPECT_EQ(r.exit_code(), 1);
}

// Every recording's whole datasets match their sha256_full (so the check refuses nothing good).
TEST(Sha256Full, EveryRecordingVerifiesAgainstItself) {
  for (const auto& entry : fs::directory_iterator(kRef)) {
    if (entry.path().extension() != ".h5") continue;
    const auto r = compare_files(entry.path(), entry.path());
    EXPECT_EQ(r.exit_code(), 0) << entry.path();
    std::int64_t checked = 0;
    for (const auto& d : r.datasets) checked += d.sha256_checked_a;
    EXPECT_GT(checked, 0) << entry.path();
  }
}

TEST(Sha256Full, RecordingReaderRefusesCorruptData) {
  TempDir dir;
  const fs::path copy = dir / "probes_linear.h5";
  fs::copy_file(kRef / "probes_linear.h5", copy);
  flip_first_bit(copy, "/probe_audio_ff_up/x");
  probes::Recording rec(copy, "probe_audio_ff_up");
  try {
    rec.input_bf16("x");
    FAIL() << "a corrupt recording must be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(copy.string() + ":/probe_audio_ff_up/x: data does not match its sha256_full"),
              std::string::npos)
        << e.what();
  }
  EXPECT_NO_THROW(rec.stored_bf16("proj_out"));

  const Outcome cli = run_psi_in("probe audio-ff-up --variant dense --reference " + copy.string(), dir / "");
  EXPECT_EQ(cli.status, 2) << cli.out << cli.err;
  EXPECT_EQ(cli.err, "psi: error: " + copy.string() +
                         ":/probe_audio_ff_up/x: data does not match its sha256_full attribute (the file is corrupt "
                         "or was changed after it was written)\n");
}

namespace {

// Removes `dataset`'s sha256_full, the rest of the file as it was: a recording made by a tool
// that hashes nothing, or edited to pass.
void drop_sha256(const fs::path& file, const std::string& dataset) {
  fs::permissions(file, fs::perms::owner_read | fs::perms::owner_write, fs::perm_options::add);
  const hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(f, 0) << file;
  const hid_t d = H5Dopen2(f, dataset.c_str(), H5P_DEFAULT);
  ASSERT_GE(d, 0) << dataset;
  ASSERT_GE(H5Adelete(d, "sha256_full"), 0) << dataset;
  H5Dclose(d);
  H5Fclose(f);
}

// Lines of `text` holding `a` that do not also hold `b`.
std::vector<std::string> lines_without(const std::string& text, const std::string& a, const std::string& b) {
  std::vector<std::string> out;
  std::size_t at = 0;
  while (at < text.size()) {
    const std::size_t end = std::min(text.find('\n', at), text.size());
    const std::string line = text.substr(at, end - at);
    if (line.find(a) != std::string::npos && line.find(b) == std::string::npos) out.push_back(line);
    at = end + 1;
  }
  return out;
}

}  // namespace

// Integrity is never optional by omission (class 2 of the round-four trust issue). A recording
// whose tensors lost their sha256_full is refused by psi probe, psi oracle certify and psi run on
// it (exit 2, one line naming file:dataset); with --allow-unverified the verdict is given and
// marked: every result row and claim of the table, the report's root attribute `unverified` and
// each case's field, the JSON's `unverified`, and the exit status 4 (not 0).
// A file psi writes is one psi verify accepts: psi synthinit's tensor carries its sha256_full
// (it had none, and verify refused it), which is the hash synthinit prints.
TEST(Sha256Full, SynthinitTensorFilesVerify) {
  TempDir dir;
  const fs::path out = dir / "w.h5";
  const Outcome made = run_psi_in("synthinit transformer_blocks.0.attn1.to_q.weight --shape 64 48 --out " + out.string(), dir / "");
  ASSERT_EQ(made.status, 0) << made.err;
  const Outcome verified = run_psi_in("verify " + out.string(), dir / "");
  EXPECT_EQ(verified.status, 0) << verified.out << verified.err;
  const std::string printed = made.out.substr(made.out.find("sha256 ") + 7, 64);
  EXPECT_EQ(read_integrity(hdf5::File::open_read(out), "/transformer_blocks.0.attn1.to_q.weight").sha256_full, printed);
}

TEST(Sha256Full, UnverifiedDataIsRefusedOrItsVerdictMarked) {
  TempDir dir;
  const fs::path copy = dir / "probes_linear.h5";
  fs::copy_file(kRef / "probes_linear.h5", copy);
  drop_sha256(copy, "/probe_audio_ff_up/x");
  drop_sha256(copy, "/probe_audio_ff_up/proj_out");
  drop_sha256(copy, "/probe_video_q_proj/x");
  const std::string x_missing = copy.string() + ":/probe_audio_ff_up/x: no sha256_full: nothing to check its data against";

  const std::string probe = "probe audio-ff-up --variant dense --reference " + copy.string();
  const Outcome refused = run_psi_in(probe, dir / "");
  EXPECT_EQ(refused.status, 2) << refused.out << refused.err;
  EXPECT_TRUE(refused.err.starts_with("psi: error: " + x_missing)) << refused.err;
  EXPECT_EQ(refused.err.find('\n'), refused.err.size() - 1) << refused.err;

  const fs::path out = dir / "outputs.h5";
  const Outcome allowed = run_psi_in(probe + " --allow-unverified --out " + out.string(), dir / "");
  EXPECT_EQ(allowed.status, int(Exit::unverified)) << allowed.out << allowed.err;
  EXPECT_NE(allowed.out.find("UNVERIFIED: " + x_missing), std::string::npos) << allowed.out;
  EXPECT_NE(allowed.out.find("proj_out"), std::string::npos) << allowed.out;
  EXPECT_NE(allowed.out.find("UNVERIFIED (the recorded tensor: no sha256_full"), std::string::npos) << allowed.out;
  // Every result row of the table carries the mark (gelu_out's hash was kept, but its input was not).
  EXPECT_EQ(lines_without(allowed.out, "dense ", "UNVERIFIED"), std::vector<std::string>{}) << allowed.out;
  EXPECT_NE(allowed.err.find("psi: warning: UNVERIFIED: 2 dataset(s)"), std::string::npos) << allowed.err;
  EXPECT_NE(unverified_marker(hdf5::File::open_read(out)).find(x_missing), std::string::npos);

  const std::string certify = "oracle certify --file " + copy.string() + " --probe probe_video_q_proj --rows 0:1 --json";
  const Outcome oracle_refused = run_psi_in(certify, dir / "");
  EXPECT_EQ(oracle_refused.status, 2) << oracle_refused.out << oracle_refused.err;
  EXPECT_NE(oracle_refused.err.find(copy.string() + ":/probe_video_q_proj/x: no sha256_full"), std::string::npos)
      << oracle_refused.err;
  const Outcome oracle_allowed = run_psi_in(certify + " --allow-unverified", dir / "");
  EXPECT_EQ(oracle_allowed.status, int(Exit::unverified)) << oracle_allowed.out << oracle_allowed.err;
  const auto j = nlohmann::json::parse(oracle_allowed.out);
  ASSERT_TRUE(j["unverified"].is_array()) << oracle_allowed.out;
  EXPECT_NE(j["unverified"][0].get<std::string>().find(copy.string() + ":/probe_video_q_proj/x: no sha256_full"),
            std::string::npos);
  // The same certification of the recording as it was: no mark, exit 0.
  const Outcome oracle_clean = run_psi_in("oracle certify --file " + (kRef / "probes_linear.h5").string() +
                                              " --probe probe_video_q_proj --rows 0:1 --json --allow-unverified",
                                          dir / "");
  EXPECT_EQ(oracle_clean.status, 0) << oracle_clean.err;
  EXPECT_TRUE(nlohmann::json::parse(oracle_clean.out)["unverified"].is_null());

  // psi run on the recording: the report says so at the root, in its case and its tables.
  const std::string run = "run projection-oracle --reference " + (dir / "").parent_path().string() + " --out " + (dir / "r.h5").string();
  const Outcome run_refused = run_psi_in(run, dir / "");
  EXPECT_EQ(run_refused.status, 2) << run_refused.err;
  EXPECT_FALSE(fs::exists(dir / "r.h5"));
  const Outcome run_allowed = run_psi_in(run + " --allow-unverified", dir / "");
  EXPECT_EQ(run_allowed.status, int(Exit::unverified)) << run_allowed.err;
  EXPECT_NE(run_allowed.out.find("UNVERIFIED: "), std::string::npos) << run_allowed.out;
  const StateReader report(dir / "r.h5");
  EXPECT_NE(unverified_marker(report.file()).find(copy.string() + ":/probe_video_q_proj/x"), std::string::npos);
  const auto cases = nlohmann::json::parse(report.read_text("/report/cases"));
  ASSERT_EQ(cases.size(), 1u);
  EXPECT_NE(cases[0]["unverified"].get<std::string>().find(":/probe_video_q_proj/x: no sha256_full"), std::string::npos);
  const Outcome rendered = run_psi_in("report " + (dir / "r.h5").string(), dir / "");
  EXPECT_NE(rendered.out.find("UNVERIFIED: "), std::string::npos) << rendered.out;
}

namespace {

// Sets `dataset`'s stored attribute to `value` (a fixed-length string, as h5py writes one),
// replacing the one there: an edit that says the data is not there, or only in part.
void set_stored(const fs::path& file, const std::string& dataset, const std::string& value) {
  fs::permissions(file, fs::perms::owner_read | fs::perms::owner_write, fs::perm_options::add);
  const hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(f, 0) << file;
  const hid_t d = H5Dopen2(f, dataset.c_str(), H5P_DEFAULT);
  ASSERT_GE(d, 0) << dataset;
  if (H5Aexists(d, "stored") > 0) ASSERT_GE(H5Adelete(d, "stored"), 0);
  const hid_t t = H5Tcopy(H5T_C_S1);
  H5Tset_size(t, value.size());
  const hid_t space = H5Screate(H5S_SCALAR);
  const hid_t a = H5Acreate2(d, "stored", t, space, H5P_DEFAULT, H5P_DEFAULT);
  ASSERT_GE(a, 0);
  EXPECT_GE(H5Awrite(a, t, value.c_str()), 0);
  H5Aclose(a);
  H5Sclose(space);
  H5Tclose(t);
  H5Dclose(d);
  H5Fclose(f);
}

}  // namespace

// Integrity by omission through `stored` (round four): only a tensor stored whole is hashed, so
// a dataset that holds data while its stored attribute says 'none', or more rows than the range
// it names, would be read unchecked. The data here is also changed: probe, certify and verify
// must refuse the file for what its attribute claims, not compute with it or pass it.
TEST(Sha256Full, StoredAttributeThatHidesDataIsRefused) {
  TempDir dir;
  struct Case {
    std::string args;
    int status;
    std::string said;  // on stderr for exit 2, on stdout for verify's problem (exit 1)
  };
  const fs::path copy = dir / "probes_linear.h5";
  const std::string x = copy.string() + ":/probe_video_q_proj/x: ";
  const std::string probe = "probe video-q-proj --variant dense --reference " + copy.string();
  const std::string certify = "oracle certify --file " + copy.string() + " --probe probe_video_q_proj --rows 0:1";
  const std::string none = x + "its stored attribute says 'none' but it holds 1048576 elements [256, 4096]";
  const std::map<std::string, std::vector<Case>> cases = {
      {"none", {{probe, 2, none}, {certify, 2, none}, {"verify " + copy.string(), 2, none}}},
      {"rows_0_to_0_of_axis_1",
       {{probe, 2, x + "stored 'rows_0_to_0_of_axis_1' but the dataset is [256, 4096]"},
        {certify, 2, x + "stores part of the tensor (stored='rows_0_to_0_of_axis_1')"},
        {"verify " + copy.string(), 1,
         x + "its stored attribute says 'rows_0_to_0_of_axis_1' but it holds [256, 4096]; data it does not describe "
             "would go unchecked"}}},
  };
  for (const auto& [stored, runs] : cases) {
    fs::remove(copy);
    fs::copy_file(kRef / "probes_linear.h5", copy);
    flip_first_bit(copy, "/probe_video_q_proj/x");
    set_stored(copy, "/probe_video_q_proj/x", stored);
    for (const Case& c : runs) {
      const Outcome r = run_psi_in(c.args, dir / "");
      EXPECT_EQ(r.status, c.status) << c.args << "\n" << r.out << r.err;
      EXPECT_NE((c.status == 2 ? r.err : r.out).find(c.said), std::string::npos) << c.args << "\n" << r.out << r.err;
      if (c.status == 2) {
        EXPECT_TRUE(r.err.starts_with("psi: error: ")) << r.err;
        EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << c.args << "\n" << r.err;
      }
    }
  }
}
