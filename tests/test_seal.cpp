// psi seal: a user's tensors from each format psi reads (files written by safetensors, NumPy and
// h5py: tests/data/oracle/make_user_files.py, tests/data/npz/make_fixtures.py) copied into a psi
// file that psi verify accepts, each tensor with the SHA-256 of its bytes; from then on an edit is
// caught by every reader; and what seal must not do (replace its input, seal data that does not
// match its own hash) is refused.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "hdf5/h5.h"
#include "tests/psi_command.h"

namespace fs = std::filesystem;
using psi::testing::Outcome;
using psi::testing::run_psi_in;
using psi::testing::TempDir;

namespace {

const fs::path kOracle = fs::path(PSI_TEST_DATA) / "oracle";
const fs::path kNpz = fs::path(PSI_TEST_DATA) / "npz";

std::string fixture_sha(const std::string& name) {
  return psi::hdf5::File::open_read(kOracle / "fixture.h5").attr_string("/" + name, "sha256_full");
}

// Flips the low bit of the first element of a uint16 dataset in place, behind psi's back.
void flip_first_bit(const fs::path& file, const std::string& dataset) {
  psi::hdf5::Handle f(H5Fopen(file.c_str(), H5F_ACC_RDWR, H5P_DEFAULT), H5Fclose);
  ASSERT_TRUE(f);
  psi::hdf5::Handle d(H5Dopen2(f.get(), dataset.c_str(), H5P_DEFAULT), H5Dclose);
  ASSERT_TRUE(d);
  psi::hdf5::Handle space(H5Dget_space(d.get()), H5Sclose);
  std::vector<std::uint16_t> v(std::size_t(H5Sget_simple_extent_npoints(space.get())));
  ASSERT_GE(H5Dread(d.get(), H5T_NATIVE_UINT16, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()), 0);
  v[0] ^= 1;
  ASSERT_GE(H5Dwrite(d.get(), H5T_NATIVE_UINT16, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()), 0);
}

TEST(Seal, EveryFormatSealsIntoAFileVerifyAccepts) {
  const TempDir dir("psi_seal");
  struct Case {
    fs::path in;
    std::string extra;
  };
  const std::vector<Case> cases{{kOracle / "eq5.safetensors", ""},
                                {kOracle / "y_bits.npy", " --as bf16"},
                                {kOracle / "eq5_h5py.h5", " --as bf16"},
                                {kOracle / "y_f32.npy", ""},
                                {kNpz / "ab.npz", ""},
                                {kOracle / "fixture.h5", ""}};
  for (const Case& c : cases) {
    const fs::path out = dir / (c.in.filename().string() + ".sealed.h5");
    const Outcome s = run_psi_in("seal " + c.in.string() + " --out " + out.string() + c.extra, dir.path());
    ASSERT_EQ(s.status, 0) << c.in << "\n" << s.out << s.err;
    const Outcome v = run_psi_in("verify " + out.string(), dir.path());
    EXPECT_EQ(v.status, 0) << v.out << v.err;
    EXPECT_NE(v.out.find("OK (psi-seal/1;"), std::string::npos) << v.out;
    // The same elements: equal to the source, as BF16 where --as bf16 said so.
    const Outcome cmp = run_psi_in("compare " + c.in.string() + " " + out.string() + c.extra, dir.path());
    EXPECT_EQ(cmp.status, 0) << c.in << "\n" << cmp.out << cmp.err;
  }
  // The hashes are of the bytes: the h5py file's uint16 bits, sealed as BF16, are fixture.h5's.
  const psi::hdf5::File sealed = psi::hdf5::File::open_read(dir / "eq5_h5py.h5.sealed.h5");
  for (const char* name : {"x", "w", "b", "y"}) {
    EXPECT_EQ(sealed.attr_string(std::string("/") + name, "sha256_full"), fixture_sha(name)) << name;
    EXPECT_EQ(sealed.info(std::string("/") + name).kind, psi::hdf5::ElemKind::bf16) << name;
  }
  EXPECT_EQ(sealed.attr_string("/x", "sealed_from"), (kOracle / "eq5_h5py.h5").string() + ":/x");
  // Without --as bf16 uint16 stays uint16, hashed all the same.
  const fs::path plain = dir / "plain.h5";
  ASSERT_EQ(run_psi_in("seal " + (kOracle / "eq5_h5py.h5").string() + " --out " + plain.string(), dir.path()).status, 0);
  EXPECT_EQ(psi::hdf5::File::open_read(plain).info("/x").kind, psi::hdf5::ElemKind::u16);
  EXPECT_EQ(run_psi_in("verify " + plain.string(), dir.path()).status, 0);
}

TEST(Seal, AnEditAfterSealingIsCaughtByEveryReader) {
  const TempDir dir("psi_seal_edit");
  const fs::path out = dir / "proj.h5";
  ASSERT_EQ(run_psi_in("seal " + (kOracle / "eq5.safetensors").string() + " --out " + out.string(), dir.path()).status, 0);
  const std::string ops = " --file " + out.string() + " --x attn.x --w blocks.0.to_q.weight --row 0 --col 0";
  EXPECT_EQ(run_psi_in("oracle explain" + ops, dir.path()).status, 0);
  flip_first_bit(out, "/attn.x");
  const Outcome v = run_psi_in("verify " + out.string(), dir.path());
  EXPECT_EQ(v.status, 1) << v.out;
  EXPECT_NE(v.out.find(out.string() + ":/attn.x: data does not match its sha256_full"), std::string::npos) << v.out;
  const Outcome o = run_psi_in("oracle explain" + ops, dir.path());
  EXPECT_EQ(o.status, 2) << o.out;
  EXPECT_NE(o.err.find(":/attn.x: data does not match its sha256_full"), std::string::npos) << o.err;
  const Outcome c = run_psi_in("compare " + out.string() + " " + (kOracle / "eq5.safetensors").string(), dir.path());
  EXPECT_EQ(c.status, 2) << c.out;
  // Sealing it again is refused too: seal reads as every reader does.
  const Outcome again = run_psi_in("seal " + out.string() + " --out " + (dir / "again.h5").string(), dir.path());
  EXPECT_EQ(again.status, 2) << again.out;
  EXPECT_TRUE(again.err.starts_with("psi: error: " + out.string() + ":/attn.x: data does not match its sha256_full"))
      << again.err;
  EXPECT_FALSE(fs::exists(dir / "again.h5"));
}

TEST(Seal, RefusesToReplaceItsInputOrAFileNotPsis) {
  const TempDir dir("psi_seal_out");
  const fs::path in = dir / "t.safetensors";
  fs::copy_file(kOracle / "eq5.safetensors", in);
  const Outcome self = run_psi_in("seal " + in.string() + " --out " + in.string(), dir.path());
  EXPECT_EQ(self.status, 2) << self.out;
  EXPECT_TRUE(self.err.starts_with("psi: error: seal: --out")) << self.err;
  const fs::path theirs = dir / "theirs.h5";
  fs::copy_file(kOracle / "eq5_h5py.h5", theirs);
  const Outcome refused = run_psi_in("seal " + in.string() + " --out " + theirs.string(), dir.path());
  EXPECT_EQ(refused.status, 2) << refused.out;
  EXPECT_EQ(psi::testing::slurp(theirs), psi::testing::slurp(kOracle / "eq5_h5py.h5"));
  EXPECT_EQ(run_psi_in("seal " + in.string() + " --out " + theirs.string() + " --force", dir.path()).status, 0);
  // psi's own sealed file may be replaced without --force.
  EXPECT_EQ(run_psi_in("seal " + in.string() + " --out " + theirs.string(), dir.path()).status, 0);
  const Outcome usage = run_psi_in("seal", dir.path());
  EXPECT_EQ(usage.status, 2);
}

}  // namespace
