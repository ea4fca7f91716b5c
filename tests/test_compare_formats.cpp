// psi compare on files of the other formats users save tensors in, written by those formats'
// own writers (tests/data/npy/make_fixtures.py with NumPy, tests/data/safetensors/make_fixtures.py
// with the safetensors package): NumPy .npy files in any byte order, memory order and format
// version, and safetensors files of every numeric dtype. The same values are equal, a difference
// is found and named, files pair with HDF5 files and with each other, and what psi does not
// read (object arrays, other dtypes, lying headers, truncated data, zip archives that are no
// .npz, names that are no path) is one `psi: error:` line, exit 2. The .npy header parser's refusals are driven
// directly too (engine/npy.h); the safetensors reader's through test_bad_input_safetensors. Then
// what users of these files need beside: BF16 kept as uint16 read as BF16 (--as bf16), and every
// differing element listed (--differences).
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/checkpoint/safetensors.h"
#include "engine/error.h"
#include "engine/npy.h"
#include "hdf5/h5.h"
#include "tests/compare_cli.h"
#include "tests/psi_command.h"

namespace fs = std::filesystem;
using psi::testing::Outcome;
using psi::testing::compare;
using psi::testing::expect_refused;
using psi::testing::run_psi_in;
using psi::testing::spit;
using psi::testing::TempDir;

namespace {

const fs::path kNpy = fs::path(PSI_TEST_DATA) / "npy";
const fs::path kSt = fs::path(PSI_TEST_DATA) / "safetensors";

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

  // A zip is read as an .npz (test_npz.cpp): one cut short, and a torch.save file, which holds a pickle.
  const fs::path zip = dir / "cut.npz";
  spit(zip, std::string("PK\x03\x04", 4) + std::string(60, '\0'));
  expect_refused(compare(zip, kNpy / "a.npy", dir), zip, "truncated or corrupt zip archive");
  const fs::path torch = fs::path(PSI_TEST_DATA) / "npz" / "torch_like.pt";
  expect_refused(compare(torch, kNpy / "a.npy", dir), torch, "a PyTorch torch.save file (a zip holding a pickle, which psi never runs)");

  const fs::path folder = dir / "folder.npy";
  fs::create_directories(folder);
  expect_refused(compare(folder, kNpy / "a.npy", dir), folder, "not a regular file");
  if (::geteuid() != 0) {  // root reads whatever the mode says
    const fs::path locked = dir / "locked.npy";
    fs::copy_file(kNpy / "a.npy", locked);
    fs::permissions(locked, fs::perms::none);
    expect_refused(compare(locked, kNpy / "a.npy", dir), locked, "permission denied (the file may not be read)");
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

TEST(SafetensorsCompare, TheSameTensorsAreEqualWhateverTheirOrder) {
  TempDir dir;
  const Outcome r = compare(kSt / "states_a.safetensors", kSt / "states_same.safetensors", dir, " --json");
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  const auto j = nlohmann::json::parse(r.out);
  std::map<std::string, std::string> dtypes;
  for (const auto& d : j["datasets"]) {
    EXPECT_EQ(d["status"], "equal") << d.dump();
    dtypes[d["path_a"]] = d["dtype"];
  }
  // BF16, F32 and U8 as stored; F16 as the float32 of its values, BOOL as uint8, I32 widened.
  const std::map<std::string, std::string> want = {{"/audio", "float32"},      {"/mask", "uint8"},
                                                   {"/model/block0/x", "float32"}, {"/step", "int64"},
                                                   {"/video", "bfloat16"}};
  EXPECT_EQ(dtypes, want) << r.out;
}

TEST(SafetensorsCompare, DifferencesAreFoundTensorByTensor) {
  TempDir dir;
  const Outcome r = compare(kSt / "states_b.safetensors", kSt / "states_a.safetensors", dir, " --json");
  EXPECT_EQ(r.status, 1) << r.out << r.err;
  const auto j = nlohmann::json::parse(r.out);
  std::map<std::string, std::pair<std::string, int>> got;
  for (const auto& d : j["datasets"]) got[d["path_a"]] = {d["status"], d.value("differing", 0)};
  EXPECT_EQ(got["/video"], std::make_pair(std::string("differs"), 1)) << r.out;  // one BF16 ulp at [2, 5]
  EXPECT_EQ(got["/audio"], std::make_pair(std::string("differs"), 1)) << r.out;  // -0 against +0
  for (const char* same : {"/step", "/mask", "/model/block0/x"}) EXPECT_EQ(got[same].first, "equal") << same;
  const Outcome text = compare(kSt / "states_b.safetensors", kSt / "states_a.safetensors", dir);
  EXPECT_NE(text.out.find("/video"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("ulp"), std::string::npos) << text.out;
}

// F16 is read as the float32 of each value, NaNs with their sign and payload: two F16 NaNs that
// differ only there differ (as they would stored as F16).
TEST(SafetensorsCompare, F16NaNPayloadsAreKept) {
  TempDir dir;
  auto f16 = [&](const std::string& name, std::vector<std::uint16_t> bits) {
    std::vector<psi::ckpt::SafetensorsTensor> t(1);
    t[0] = {"h", "F16", {std::int64_t(bits.size())}, std::vector<std::byte>(bits.size() * 2)};
    std::memcpy(t[0].bytes.data(), bits.data(), t[0].bytes.size());
    psi::ckpt::write_safetensors(dir / name, t);
    return dir / name;
  };
  const fs::path a = f16("a.safetensors", {0x7e00, 0x3c00, 0xfc00}), same = f16("same.safetensors", {0x7e00, 0x3c00, 0xfc00});
  const fs::path payload = f16("payload.safetensors", {0x7e01, 0x3c00, 0xfc00}), sign = f16("sign.safetensors", {0xfe00, 0x3c00, 0xfc00});
  EXPECT_EQ(compare(a, same, dir).status, 0);
  for (const fs::path& other : {payload, sign}) {
    const Outcome r = compare(a, other, dir, " --json");
    EXPECT_EQ(r.status, 1) << other << "\n" << r.out << r.err;
    EXPECT_EQ(nlohmann::json::parse(r.out)["datasets"][0]["differing"], 1) << r.out;
  }
}

TEST(SafetensorsCompare, FilesOfEveryFormatPair) {
  TempDir dir;
  // One tensor each side: the .npy's array pairs with the safetensors file's one tensor.
  const Outcome one = compare(kSt / "one_f32.safetensors", kNpy / "a.npy", dir);
  EXPECT_EQ(one.status, 0) << one.out << one.err;
  // By name with an HDF5 file: a tensor whose name has groups is the HDF5 path of that name.
  const psi::ckpt::SafetensorsFile st(kSt / "states_a.safetensors", {}, psi::ckpt::SafetensorsDtypes::any);
  const std::vector<std::byte> video = st.bytes("video");
  std::vector<float> xf;
  for (const double v : {0.5, -1.25, 3.0, 65504.0, -0.0, 0x1p-24}) xf.push_back(float(v));
  const fs::path h5 = dir / "states.h5";
  {
    psi::hdf5::File f = psi::hdf5::File::create(h5);
    f.write_elements("/model/block0/x", psi::hdf5::ElemKind::f32, {2, 3}, xf.data(), {});
    f.write_elements("/video", psi::hdf5::ElemKind::bf16, {4, 8}, video.data(), {});
    f.commit();
  }
  const Outcome by_name = compare(kSt / "states_a.safetensors", h5, dir, " --only 'video|block0'");
  EXPECT_EQ(by_name.status, 0) << by_name.out << by_name.err;
}

TEST(SafetensorsCompare, WhatPsiDoesNotReadIsOneLine) {
  TempDir dir;
  expect_refused(compare(kSt / "u64.safetensors", kSt / "states_a.safetensors", dir), kSt / "u64.safetensors",
                 "tensor ids is U64, which psi does not compare");
  expect_refused(compare(kSt / "states_a.safetensors", kSt / "group_clash.safetensors", dir),
                 kSt / "group_clash.safetensors", "\"a\" cannot be both a tensor and a group");
  // A file whose header is cut, and one whose data ends early: the reader's own refusals.
  const std::string good = psi::testing::slurp(kSt / "states_a.safetensors");
  const fs::path cut = dir / "cut.safetensors";
  spit(cut, good.substr(0, good.size() - 1));
  expect_refused(compare(cut, kSt / "states_a.safetensors", dir), cut, "out of range of the");
  const fs::path dotdot = dir / "dotdot.safetensors";
  {
    std::vector<psi::ckpt::SafetensorsTensor> t;
    t.push_back(psi::ckpt::bf16_tensor("run/../x", {1}, std::vector<psi::Bf16>(1)));
    psi::ckpt::write_safetensors(dotdot, t);
  }
  expect_refused(compare(dotdot, kSt / "states_a.safetensors", dir), dotdot,
                 "tensor name \"run/../x\" has an empty, '.' or '..' part");
  const fs::path text = dir / "notes.txt";
  spit(text, "12345678{ not a header, and shorter than it says }");
  expect_refused(compare(text, kSt / "states_a.safetensors", dir), text, "not an HDF5, NumPy .npy or safetensors file");
}

// BF16 kept as uint16 bits (NumPy has no BF16): integers unless the user says --as bf16, and then
// BF16 against psi's BF16 on the other side, the output saying which reading was taken.
TEST(NpyCompare, Uint16BitsAreBf16OnlyWhenAskedFor) {
  TempDir dir;
  const psi::NpyArray bits = psi::read_npy(kNpy / "bits.npy");
  const fs::path h5 = dir / "bits.h5";
  {
    psi::hdf5::File f = psi::hdf5::File::create(h5);
    f.write_elements("/bits", psi::hdf5::ElemKind::bf16, bits.shape, bits.data.data(), {});
    f.commit();
  }
  const Outcome ints = compare(kNpy / "bits.npy", h5, dir);
  EXPECT_EQ(ints.status, 2) << ints.out << ints.err;
  EXPECT_NE(ints.out.find("dtype uint16 (no dtype='bfloat16' attribute; --as bf16 reads it as BF16) in A vs bfloat16 in B"),
            std::string::npos)
      << ints.out;
  const Outcome as_bf16 = compare(kNpy / "bits.npy", h5, dir, " --as bf16 --json");
  EXPECT_EQ(as_bf16.status, 0) << as_bf16.out << as_bf16.err;
  const auto j = nlohmann::json::parse(as_bf16.out);
  ASSERT_EQ(j["datasets"].size(), 1u) << as_bf16.out;
  EXPECT_EQ(j["datasets"][0]["dtype"], "bfloat16");
  EXPECT_EQ(j["datasets"][0]["note"], "A's uint16 read as BF16 (--as bf16)") << as_bf16.out;
  // One BF16 ulp apart is one ulp, not an integer difference.
  std::vector<std::uint16_t> up(bits.data.size() / 2);
  std::memcpy(up.data(), bits.data.data(), bits.data.size());
  up[4] += 1;
  const fs::path h5up = dir / "bits_up.h5";
  {
    psi::hdf5::File f = psi::hdf5::File::create(h5up);
    f.write_elements("/bits", psi::hdf5::ElemKind::u16, bits.shape, up.data(), {});
    f.commit();
  }
  const Outcome ulp = compare(kNpy / "bits.npy", h5up, dir, " --as bf16 --json");
  EXPECT_EQ(ulp.status, 1) << ulp.out << ulp.err;
  const auto u = nlohmann::json::parse(ulp.out)["datasets"][0];
  EXPECT_EQ(u["dtype"], "bfloat16") << ulp.out;
  EXPECT_EQ(u["differing"], 1) << ulp.out;
  EXPECT_EQ(u["max_ulp"], 1) << ulp.out;
  EXPECT_EQ(u["note"], "A's and B's uint16 read as BF16 (--as bf16)") << ulp.out;
  const Outcome bad = compare(kNpy / "bits.npy", h5, dir, " --as bf32");
  EXPECT_EQ(bad.status, 2) << bad.out << bad.err;
}

// --differences lists the differing elements under their dataset: the first N in row-major
// order with what differs in each (ULPs, the sign of zero, a NaN, a sign flip), or every one.
TEST(CompareDifferences, EveryDifferingElementCanBeListed) {
  TempDir dir;
  std::vector<float> a(12), b;
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = 0.25f * float(i) - 1.0f;  // a[4] is +0
  b = a;
  b[1] = std::nextafter(a[1], 10.0f);       // one ulp
  b[4] = -0.0f;                              // the sign of zero
  b[6] = std::numeric_limits<float>::quiet_NaN();
  b[9] = -a[9];                              // a sign flip
  const fs::path fa = dir / "a.h5", fb = dir / "b.h5";
  for (const auto& [path, v] : {std::pair{fa, &a}, std::pair{fb, &b}}) {
    psi::hdf5::File f = psi::hdf5::File::create(path);
    f.write_elements("/t", psi::hdf5::ElemKind::f32, {3, 4}, v->data(), {});
    f.commit();
  }
  const Outcome two = compare(fa, fb, dir, " --differences 2");
  EXPECT_EQ(two.status, 1) << two.out << two.err;
  EXPECT_NE(two.out.find("\n    @1 [0, 1]: A=-0.75 (0xbf400000) B=-0.74999994 (0xbf3fffff), 1 ulp\n"
                         "    @4 [1, 0]: A=0 (0x00000000) B=-0 (0x80000000), the sign of zero\n"
                         "    ... 2 more differing (--differences all lists every one)\n"),
            std::string::npos)
      << two.out;
  const Outcome all = compare(fa, fb, dir, " --differences all --json");
  EXPECT_EQ(all.status, 1) << all.out << all.err;
  const auto list = nlohmann::json::parse(all.out)["datasets"][0]["differences"];
  ASSERT_EQ(list.size(), 4u) << all.out;
  EXPECT_EQ(list[0]["ulp"], 1);
  EXPECT_EQ(list[1]["ulp"], 0);
  EXPECT_EQ(list[2]["flat_index"], 6);
  EXPECT_EQ(list[2]["ulp"], "nan");
  EXPECT_EQ(list[3]["index"], nlohmann::json::array({2, 1}));
  EXPECT_TRUE(list[3]["sign_flip"].get<bool>());
  EXPECT_TRUE(list[3]["ulp"].is_null());
  // Without the option the view is one line a dataset, and JSON has no list.
  const Outcome plain = compare(fa, fb, dir, " --json");
  EXPECT_FALSE(nlohmann::json::parse(plain.out)["datasets"][0].contains("differences")) << plain.out;
}

// --list writes every differing element to a CSV file, under psi's output rule: psi's own list
// is replaced, another file only with --force, an input never.
TEST(CompareDifferences, ListWritesEveryDifferenceToCsv) {
  TempDir dir;
  std::vector<float> a(6, 1.0f), b(6, 1.0f);
  b[2] = 2.0f;
  b[5] = -1.0f;
  const fs::path fa = dir / "a.h5", fb = dir / "b,odd \"name\".h5";
  for (const auto& [path, v] : {std::pair{fa, &a}, std::pair{fb, &b}}) {
    psi::hdf5::File f = psi::hdf5::File::create(path);
    f.write_elements("/x,y", psi::hdf5::ElemKind::f32, {6}, v->data(), {});
    f.commit();
  }
  const fs::path csv = dir / "diffs.csv";
  const std::string args = " --list " + csv.string();
  const Outcome r = run_psi_in("compare " + fa.string() + " '" + fb.string() + "'" + args, dir.path());
  EXPECT_EQ(r.status, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("list: 2 differing elements written to " + csv.string()), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("\n    @"), std::string::npos) << r.out;  // the table lists none without --differences
  EXPECT_EQ(psi::testing::slurp(csv),
            "dataset_a,dataset_b,flat_index,index,a,b,ulp,sign_flip\n"
            "\"/x,y\",\"/x,y\",2,[2],1 (0x3f800000),2 (0x40000000),8388608,0\n"
            "\"/x,y\",\"/x,y\",5,[5],1 (0x3f800000),-1 (0xbf800000),,1\n");
  // Again: psi's own list is replaced.
  EXPECT_EQ(run_psi_in("compare " + fa.string() + " '" + fb.string() + "'" + args, dir.path()).status, 1);
  const fs::path mine = dir / "notes.csv";
  spit(mine, "my notes\n");
  const Outcome kept = run_psi_in("compare " + fa.string() + " '" + fb.string() + "' --list " + mine.string(), dir.path());
  EXPECT_EQ(kept.status, 2) << kept.out << kept.err;
  EXPECT_EQ(psi::testing::slurp(mine), "my notes\n");
  const Outcome input = run_psi_in("compare " + fa.string() + " '" + fb.string() + "' --list " + fa.string(), dir.path());
  EXPECT_EQ(input.status, 2) << input.out << input.err;
  EXPECT_EQ(run_psi_in("compare " + fa.string() + " '" + fb.string() + "' --list " + mine.string() + " --force", dir.path()).status, 1);
  EXPECT_TRUE(psi::testing::slurp(mine).starts_with("dataset_a,")) << psi::testing::slurp(mine);
}

// A user's file records no hash: the SHA-256 of what was compared is printed beside the verdict
// (and in the JSON), so the verdict names its bytes; a file with sha256_full gives its own,
// checked, and the text adds nothing. y_bits.npy holds fixture.h5's y as uint16 bits: one hash.
TEST(CompareSha256, EveryTensorComparedNamesItsBytes) {
  const TempDir dir;
  const fs::path oracle = fs::path(PSI_TEST_DATA) / "oracle";
  const std::string y_sha = psi::hdf5::File::open_read(oracle / "fixture.h5").attr_string("/y", "sha256_full");
  const Outcome text = compare(oracle / "y_bits.npy", oracle / "y_bits.npy", dir);
  EXPECT_EQ(text.status, 0) << text.out << text.err;
  EXPECT_NE(text.out.find("\n    sha256: A " + y_sha + ", B " + y_sha + "\n"), std::string::npos) << text.out;
  const Outcome js = compare(oracle / "y_bits.npy", oracle / "y_bits.npy", dir, " --json");
  ASSERT_EQ(js.status, 0) << js.err;
  const auto d = nlohmann::json::parse(js.out)["datasets"][0];
  EXPECT_EQ(d["sha256"]["a"], y_sha);
  EXPECT_EQ(d["sha256_checked"]["a"], false);

  const Outcome hashed = compare(oracle / "fixture.h5", oracle / "fixture.h5", dir, " --json --only ^/y$");
  ASSERT_EQ(hashed.status, 0) << hashed.err;
  const auto h = nlohmann::json::parse(hashed.out)["datasets"][0];
  EXPECT_EQ(h["sha256"]["b"], y_sha);
  EXPECT_EQ(h["sha256_checked"]["b"], true);
  const Outcome hashed_text = compare(oracle / "fixture.h5", oracle / "fixture.h5", dir, " --only ^/y$");
  EXPECT_EQ(hashed_text.out.find("sha256:"), std::string::npos) << hashed_text.out;
}

// BF16 states saved as float32 (a .float() copy): --as bf16 compares them as BF16, so the one
// BF16 step at [1, 2] is 1 ULP, not 65536; a float32 that is no BF16 value keeps the float32
// comparison, and the note says which value made it so.
TEST(NpyCompare, Float32HoldingBf16IsMeasuredInBf16UlpsWithAsBf16) {
  const TempDir dir;
  const fs::path a = kNpy / "bf16_as_f32_a.npy", b = kNpy / "bf16_as_f32_b.npy";
  const Outcome plain = compare(a, b, dir, " --json");
  ASSERT_EQ(plain.status, 1) << plain.err;
  EXPECT_EQ(nlohmann::json::parse(plain.out)["datasets"][0]["max_ulp"], 65536) << plain.out;
  const Outcome as = compare(a, b, dir, " --json --as bf16");
  ASSERT_EQ(as.status, 1) << as.err;
  const auto d = nlohmann::json::parse(as.out)["datasets"][0];
  EXPECT_EQ(d["max_ulp"], 1) << as.out;
  EXPECT_EQ(d["differing"], 1) << as.out;
  EXPECT_NE(d["note"].get<std::string>().find("float32 holding BF16 values, compared as BF16 (--as bf16)"),
            std::string::npos) << as.out;
  const Outcome equal = compare(a, a, dir, " --as bf16");
  EXPECT_EQ(equal.status, 0) << equal.out;
  // a.npy's values are no BF16 values: float32 ULPs, and why.
  const Outcome f32 = compare(kNpy / "a.npy", kNpy / "a_b.npy", dir, " --json --as bf16");
  ASSERT_EQ(f32.status, 1) << f32.err;
  const auto e = nlohmann::json::parse(f32.out)["datasets"][0];
  EXPECT_EQ(e["max_ulp"], 1) << f32.out;
  EXPECT_NE(e["note"].get<std::string>().find("a.npy:/a element "), std::string::npos) << f32.out;
  EXPECT_NE(e["note"].get<std::string>().find("is not a BF16 value, so compared as float32"), std::string::npos) << f32.out;
}
