// psi compare on NumPy .npy files, as a user saves them (tests/data/npy/make_fixtures.py writes
// them with NumPy's own writer): any byte order, memory order and format version holding the
// same values is equal; a difference is found and named; an .npy pairs with the other side's
// one tensor; and what psi does not read (object arrays, other dtypes, lying headers, truncated
// data, zip archives) is one `psi: error:` line, exit 2. The header parser's refusals are
// driven directly too (engine/npy.h).
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/error.h"
#include "engine/npy.h"
#include "hdf5/h5.h"
#include "tests/psi_command.h"

namespace fs = std::filesystem;
using psi::testing::Outcome;
using psi::testing::run_psi_in;

namespace {

const fs::path kNpy = fs::path(PSI_TEST_DATA) / "npy";

class TempDir {
 public:
  TempDir() : dir_(fs::temp_directory_path() / ("psi_npy_" + std::to_string(::getpid()) + "_" + std::to_string(n_++))) {
    fs::create_directories(dir_);
  }
  ~TempDir() { fs::remove_all(dir_); }
  fs::path operator/(const std::string& s) const { return dir_ / s; }
  const fs::path& path() const { return dir_; }

 private:
  static inline int n_ = 0;
  fs::path dir_;
};

void spit(const fs::path& p, const std::string& bytes) { std::ofstream(p, std::ios::binary) << bytes; }

Outcome compare(const fs::path& a, const fs::path& b, const TempDir& dir, const std::string& extra = "") {
  return run_psi_in("compare " + a.string() + " " + b.string() + extra, dir.path());
}

// One `psi: error:` line naming the file, with `why` in it; exit 2.
void expect_refused(const Outcome& r, const fs::path& file, const std::string& why) {
  EXPECT_EQ(r.status, 2) << r.out << r.err;
  EXPECT_TRUE(r.err.starts_with("psi: error: " + file.string() + ": ")) << r.err;
  EXPECT_NE(r.err.find(why), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
}

// An .npy file of format 1.0 from a header's dict text and the data bytes.
std::string npy(const std::string& dict, const std::string& data) {
  std::string header = dict;
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string out = std::string("\x93NUMPY\x01\x00", 8);
  out += char(header.size() & 0xff);
  out += char(header.size() >> 8);
  return out + header + data;
}

}  // namespace

TEST(NpyCompare, TheSameValuesInAnyLayoutAreEqual) {
  TempDir dir;
  for (const char* other : {"a.npy", "a_big.npy", "a_fortran.npy", "v2.npy"}) {
    const Outcome r = compare(kNpy / "a.npy", kNpy / other, dir);
    EXPECT_EQ(r.status, 0) << other << "\n" << r.out << r.err;
    EXPECT_NE(r.out.find("equal"), std::string::npos) << other << "\n" << r.out;
  }
  for (const char* same : {"bits.npy", "scalar.npy"}) {
    const Outcome r = compare(kNpy / same, kNpy / same, dir);
    EXPECT_EQ(r.status, 0) << same << "\n" << r.out << r.err;
  }
  // Nothing to compare is no bitwise equality (psi compare's rule).
  const Outcome empty = compare(kNpy / "empty.npy", kNpy / "empty.npy", dir);
  EXPECT_EQ(empty.status, 1) << empty.err;
  EXPECT_NE(empty.out.find("not_stored"), std::string::npos) << empty.out;
  EXPECT_NE(empty.out.find("empty tensor"), std::string::npos) << empty.out;
}

TEST(NpyCompare, DifferencesAreFoundAndTheArraysPairWhateverTheirNames) {
  TempDir dir;
  const Outcome r = compare(kNpy / "a_b.npy", kNpy / "a.npy", dir, " --json");
  EXPECT_EQ(r.status, 1) << r.out << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["datasets"].size(), 1u) << r.out;
  const auto& d = j["datasets"][0];
  EXPECT_EQ(d["path_a"], "/a_b");
  EXPECT_EQ(d["path_b"], "/a");
  EXPECT_EQ(d["status"], "differs");
  EXPECT_EQ(d["dtype"], "float32");
  EXPECT_EQ(d["differing"], 2) << r.out;  // one ulp at [1, 3], -0 against +0 at [0, 0]
}

TEST(NpyCompare, AnNpyPairsWithAnHdf5FilesOneTensor) {
  TempDir dir;
  const psi::NpyArray a = psi::read_npy(kNpy / "a.npy");
  psi::F32Tensor t(a.shape);
  std::memcpy(t.ptr(), a.data.data(), a.data.size());
  const fs::path h5 = dir / "run.h5";
  {
    psi::hdf5::File f = psi::hdf5::File::create(h5);
    f.write_f32("/states/latent", t);
    f.commit();
  }
  const Outcome r = compare(kNpy / "a.npy", h5, dir);
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  // Two tensors on one side: names pair, and the .npy's name is its file's.
  const Outcome two = compare(kNpy / "a.npy", fs::path(PSI_TEST_DATA) / "compare" / "user_a.h5", dir);
  EXPECT_EQ(two.status, 1) << two.out << two.err;
  EXPECT_NE(two.out.find("only_a"), std::string::npos) << two.out;
}

TEST(NpyCompare, WhatPsiDoesNotReadIsOneLine) {
  TempDir dir;
  expect_refused(compare(kNpy / "objects.npy", kNpy / "a.npy", dir), kNpy / "objects.npy",
                 "an object array (dtype '|O'): its elements are pickled Python objects, which psi does not unpickle");
  expect_refused(compare(kNpy / "a.npy", kNpy / "int32.npy", dir), kNpy / "int32.npy", "dtype '<i4' is not one psi reads");

  const std::string good = psi::testing::slurp(kNpy / "a.npy");
  const fs::path cut = dir / "cut.npy";
  spit(cut, good.substr(0, good.size() - 3));
  expect_refused(compare(cut, kNpy / "a.npy", dir), cut, "truncated: shape [4, 8] of <f4 needs 128 bytes of data, the file holds 125");
  const fs::path longer = dir / "longer.npy";
  spit(longer, good + "xyz");
  expect_refused(compare(longer, kNpy / "a.npy", dir), longer, "3 bytes past the 128 bytes of data its header declares");
  const fs::path preamble = dir / "preamble.npy";
  spit(preamble, good.substr(0, 8));
  expect_refused(compare(preamble, kNpy / "a.npy", dir), preamble, "truncated: 8 bytes, within the .npy preamble");

  const fs::path zip = dir / "model.pt";
  spit(zip, std::string("PK\x03\x04", 4) + std::string(60, '\0'));
  expect_refused(compare(zip, kNpy / "a.npy", dir), zip, "a zip archive (NumPy's .npz, or PyTorch's torch.save file");

  const fs::path folder = dir / "folder.npy";
  fs::create_directories(folder);
  expect_refused(compare(folder, kNpy / "a.npy", dir), folder, "not a regular file");
  if (::geteuid() != 0) {  // root reads whatever the mode says
    const fs::path locked = dir / "locked.npy";
    fs::copy_file(kNpy / "a.npy", locked);
    fs::permissions(locked, fs::perms::none);
    expect_refused(compare(locked, kNpy / "a.npy", dir), locked, "cannot open: Permission denied");
  }
}

TEST(NpyHeader, LiesAndOddFormsAreRefused) {
  const std::string data16(16, '\0');
  const std::vector<std::pair<std::string, std::string>> bad = {
      {npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }", data16 + "x"), "1 bytes past the 16"},
      {npy("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999, 99999999999, 99999999999), }", ""),
       "holds more bytes than any file"},
      {npy("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", ""), "a dimension past 2^63 - 1"},
      {npy("{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }", ""), "not a whole number"},
      {npy("{'descr': [('x', '<f4')], 'fortran_order': False, 'shape': (1,), }", ""), "a structured dtype"},
      {npy("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", ""), "'descr' is given twice"},
      {npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'extra': 1}", ""), "unknown key 'extra'"},
      {npy("{'descr': '<f4', 'fortran_order': Maybe, 'shape': (1,), }", ""), "neither True nor False"},
      {npy("{'descr': '<f4', 'shape': (1,), }", ""), "lacks descr, fortran_order or shape"},
      {npy("{'descr': 'f4', 'fortran_order': False, 'shape': (1,), }", ""), "is not one psi reads"},
      {npy("{'descr': '|f4', 'fortran_order': False, 'shape': (1,), }", "abcd"), "for one-byte types only"},
      {npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), } trailing", "abcd"), "text after the header"},
      {npy("{'descr': '<f\\x34', 'fortran_order': False, 'shape': (1,), }", "abcd"), "an escaped string"},
      {npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), '\xc3\xa9': 1}", "abcd"), "a byte outside ASCII"},
      {std::string("\x93NUMPY\x04\x00", 8) + std::string(8, ' '), "format version 4.0"},
      {std::string("\x93NUMPY\x01\x00\xff\x7f", 10) + "{}", "the header declares 32767 bytes"},
      {std::string("NUMPY"), "not a NumPy .npy file"},
  };
  for (const auto& [bytes, why] : bad) {
    try {
      psi::parse_npy(bytes, "x.npy");
      ADD_FAILURE() << "accepted: " << why;
    } catch (const psi::Error& e) {
      EXPECT_EQ(e.code(), psi::Exit::bad_input);
      EXPECT_TRUE(std::string(e.what()).starts_with("x.npy: ")) << e.what();
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  }
  // What numpy writes in the forms it has: a 0-d shape, a one-element tuple, Python 2's long
  // suffix, and a big-endian float64 read little-endian.
  const psi::NpyArray s = psi::parse_npy(npy("{'descr': '>f8', 'fortran_order': False, 'shape': (), }",
                                             std::string("\x40\x04\x00\x00\x00\x00\x00\x00", 8)),
                                         "s.npy");
  EXPECT_EQ(s.shape, psi::Shape{});
  double v = 0;
  std::memcpy(&v, s.data.data(), 8);
  EXPECT_EQ(v, 2.5);
  EXPECT_EQ(psi::parse_npy(npy("{'descr': '|u1', 'fortran_order': True, 'shape': (3L,), }", "abc"), "u.npy").shape,
            psi::Shape{3});
  EXPECT_TRUE(psi::parse_npy(npy("{'descr': '<f4', 'fortran_order': True, 'shape': (0, 2), }", ""), "e.npy").data.empty());
}

TEST(NpyHeader, FortranOrderIsReadAsRowMajor) {
  // A 2 x 3 x 2 array of bytes 0..11 stored column-major: element (i, j, k) at i + 2 j + 6 k.
  std::string column_major(12, '\0');
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 2; ++k) column_major[std::size_t(i + 2 * j + 6 * k)] = char(i * 6 + j * 2 + k);
  const psi::NpyArray a =
      psi::parse_npy(npy("{'descr': '|u1', 'fortran_order': True, 'shape': (2, 3, 2), }", column_major), "f.npy");
  for (std::size_t e = 0; e < 12; ++e) EXPECT_EQ(a.data[e], e) << e;
}
