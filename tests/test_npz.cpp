// NumPy .npz archives wherever psi reads a user's tensors (hdf5/tensor_file.h, engine/zip.h), on
// files written by numpy.savez and numpy.savez_compressed themselves (tests/data/npz/
// make_fixtures.py): each member NAME.npy is the tensor /NAME, in any byte or memory order,
// stored or deflated; archives pair by name with each other and with safetensors, and a
// one-member archive with an .npy. A torch.save file (a zip too) stays refused with the
// conversion to use, and every lie a hostile archive can tell (truncation, offsets and sizes out
// of range, CRC-32, deflate streams that end early or run long, bombs, duplicate names,
// encryption, several disks) is one `psi: error:` line naming the file and member, exit 2.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/npy.h"
#include "hdf5/tensor_file.h"
#include "tests/compare_cli.h"
#include "tests/psi_command.h"

namespace fs = std::filesystem;
using psi::testing::Outcome;
using psi::testing::compare;
using psi::testing::expect_refused;
using psi::testing::run_psi_in;
using psi::testing::TempDir;
using psi::testing::spit;
using psi::testing::slurp;

namespace {

const fs::path kNpz = fs::path(PSI_TEST_DATA) / "npz";

// Little-endian fields of an archive, to read and patch.
std::uint64_t get(const std::string& s, std::size_t at, int n) {
  std::uint64_t v = 0;
  for (int i = n; i-- > 0;) v = v << 8 | std::uint8_t(s[at + std::size_t(i)]);
  return v;
}
void put(std::string& s, std::size_t at, int n, std::uint64_t v) {
  for (int i = 0; i < n; ++i) s[at + std::size_t(i)] = char(v >> (8 * i) & 0xff);
}

// Where an archive's records are: the end record, and each central header with its member's data.
struct Layout {
  std::size_t end = 0;
  std::vector<std::size_t> central, data;
};
Layout layout(const std::string& z) {
  Layout l;
  l.end = z.rfind(std::string("PK\x05\x06", 4));
  std::size_t at = std::size_t(get(z, l.end + 16, 4));
  for (std::uint64_t i = 0; i < get(z, l.end + 10, 2); ++i) {
    l.central.push_back(at);
    const std::size_t local = std::size_t(get(z, at + 42, 4));
    l.data.push_back(local + 30 + std::size_t(get(z, local + 26, 2) + get(z, local + 28, 2)));
    at += 46 + std::size_t(get(z, at + 28, 2) + get(z, at + 30, 2) + get(z, at + 32, 2));
  }
  return l;
}

TEST(Npz, SavezAndSavezCompressedReadAsTheirArrays) {
  const psi::NpyArray a = psi::read_npy(fs::path(PSI_TEST_DATA) / "npy" / "a.npy");
  for (const char* file : {"ab.npz", "ab_deflate.npz"}) {
    const psi::hdf5::File f = psi::hdf5::open_tensor_file(kNpz / file);
    EXPECT_FALSE(psi::hdf5::single_array_file(f));
    const auto format = f.attr("/", "format");
    ASSERT_TRUE(format);
    EXPECT_EQ(std::get<std::string>(*format), psi::hdf5::kNpzFormat);
    for (const char* name : {"/a", "/big", "/fortran"}) {  // big-endian and Fortran order read as a
      const psi::F32Tensor t = f.read_f32(name);
      EXPECT_EQ(t.shape, a.shape) << file << name;
      ASSERT_EQ(std::size_t(t.numel()) * 4, a.data.size()) << file << name;
      EXPECT_EQ(std::memcmp(t.ptr(), a.data.data(), a.data.size()), 0) << file << name;
    }
    EXPECT_EQ(f.read_u16("/bits").size(), 15u) << file;
    EXPECT_EQ(f.read_f64("/block/x").shape, (psi::Shape{2, 3})) << file << ": a '/' in a name is a group";
  }
}

TEST(Npz, CompareFindsEqualAndDifferingArchives) {
  TempDir dir;
  const Outcome same = compare(kNpz / "ab.npz", kNpz / "ab.npz", dir);
  EXPECT_EQ(same.status, 0) << same.out << same.err;
  const Outcome stored_vs_deflated = compare(kNpz / "ab.npz", kNpz / "ab_deflate.npz", dir);
  EXPECT_EQ(stored_vs_deflated.status, 0) << stored_vs_deflated.out << stored_vs_deflated.err;

  const Outcome r = compare(kNpz / "ab_b.npz", kNpz / "ab.npz", dir, " --json");
  EXPECT_EQ(r.status, 1) << r.out << r.err;
  const auto j = nlohmann::json::parse(r.out);
  int differs = 0;
  for (const auto& d : j["datasets"]) {
    if (d["status"] == "differs") {
      ++differs;
      EXPECT_EQ(d["path_a"], "/a") << d.dump();
      EXPECT_EQ(d["differing"], 1) << d.dump();  // one ulp at [1, 3]
    } else {
      EXPECT_EQ(d["status"], "equal") << d.dump();
    }
  }
  EXPECT_EQ(differs, 1) << r.out;
}

TEST(Npz, PairsWithSafetensorsByNameAndWithAnNpyWhenItHoldsOneArray) {
  TempDir dir;
  const Outcome npy = compare(kNpz / "a_only.npz", fs::path(PSI_TEST_DATA) / "npy" / "a.npy", dir);
  EXPECT_EQ(npy.status, 0) << npy.out << npy.err;
  const Outcome differs = compare(fs::path(PSI_TEST_DATA) / "npy" / "a_b.npy", kNpz / "a_only.npz", dir);
  EXPECT_EQ(differs.status, 1) << differs.out << differs.err;
  if (fs::exists(kNpz / "a.safetensors")) {
    const Outcome st = compare(kNpz / "a_only.npz", kNpz / "a.safetensors", dir);
    EXPECT_EQ(st.status, 0) << st.out << st.err;
    // Names pair: the archive's other tensors have no partner.
    const Outcome more = compare(kNpz / "ab.npz", kNpz / "a.safetensors", dir);
    EXPECT_EQ(more.status, 1) << more.out << more.err;
    EXPECT_NE(more.out.find("only_a"), std::string::npos) << more.out;
  }
}

TEST(Npz, TorchSaveAndMembersThatAreNoArrayAreRefused) {
  TempDir dir;
  const fs::path a = kNpz / "a_only.npz";
  expect_refused(compare(kNpz / "torch_like.pt", a, dir), kNpz / "torch_like.pt",
                 "a PyTorch torch.save file (a zip holding a pickle, which psi never runs), not a file psi reads "
                 "tensors from; save a dict of tensors with safetensors.torch.save_file(d, \"t.safetensors\")");
  expect_refused(compare(kNpz / "objects.npz", a, dir), kNpz / "objects.npz", "member \"o.npy\": an object array");
  expect_refused(compare(kNpz / "not_npy.npz", a, dir), kNpz / "not_npy.npz",
                 "member \"readme.txt\" is not an .npy array");
  expect_refused(compare(kNpz / "dup.npz", a, dir), kNpz / "dup.npz", "member \"a.npy\": appears twice in the archive");
  expect_refused(compare(kNpz / "clash.npz", a, dir), kNpz / "clash.npz", "\"a\" cannot be both a tensor and a group");
  expect_refused(compare(kNpz / "dotdot.npz", a, dir), kNpz / "dotdot.npz", "has an empty, '.' or '..' part");
}

// An archive's end as numpy writes it past 4 GiB or 65,535 members: the end record's fields
// saturated, the values in a ZIP64 end record found through its locator.
std::string with_zip64_end(const std::string& z) {
  const Layout l = layout(z);
  std::string end64(56, '\0'), locator(20, '\0');
  put(end64, 0, 4, 0x06064b50);
  put(end64, 4, 8, 44);
  put(end64, 12, 2, 45), put(end64, 14, 2, 45);
  put(end64, 24, 8, get(z, l.end + 8, 2)), put(end64, 32, 8, get(z, l.end + 10, 2));
  put(end64, 40, 8, get(z, l.end + 12, 4)), put(end64, 48, 8, get(z, l.end + 16, 4));
  put(locator, 0, 4, 0x07064b50);
  put(locator, 8, 8, l.end);
  put(locator, 16, 4, 1);
  std::string end = z.substr(l.end);
  put(end, 8, 2, 0xffff), put(end, 10, 2, 0xffff), put(end, 12, 4, 0xffffffff), put(end, 16, 4, 0xffffffff);
  return z.substr(0, l.end) + end64 + locator + end;
}

TEST(Npz, Zip64EndRecordsAreRead) {
  TempDir dir;
  const fs::path p = dir / "zip64.npz";
  spit(p, with_zip64_end(slurp(kNpz / "ab_deflate.npz")));
  const Outcome r = compare(p, kNpz / "ab.npz", dir);
  EXPECT_EQ(r.status, 0) << r.out << r.err;

  // A saturated end record with no ZIP64 record before it, and a locator that leads nowhere.
  std::string z = slurp(kNpz / "ab.npz");
  put(z, layout(z).end + 16, 4, 0xffffffff);
  const fs::path no64 = dir / "no64.npz";
  spit(no64, z);
  expect_refused(compare(no64, kNpz / "ab.npz", dir), no64, "its end record defers to a ZIP64 record, and there is none");
  std::string lost = with_zip64_end(slurp(kNpz / "ab.npz"));
  put(lost, lost.size() - 22 - 20 + 8, 8, 5);
  const fs::path nowhere = dir / "nowhere.npz";
  spit(nowhere, lost);
  expect_refused(compare(nowhere, kNpz / "ab.npz", dir), nowhere, "the ZIP64 end record's offset 5 does not lead to one");
}

// Each lie told by patching a valid archive; `why` must be in the one error line.
struct Hostile {
  const char* label;
  const char* fixture;
  void (*patch)(std::string& z, const Layout& l);
  const char* why;
};

TEST(Npz, HostileArchivesAreOneLineNamingTheCause) {
  const Hostile cases[] = {
      {"truncated", "ab.npz", [](std::string& z, const Layout&) { z.resize(z.size() - 10); },
       "no end of central directory record at its end"},
      {"cut_in_half", "ab_deflate.npz", [](std::string& z, const Layout&) { z.resize(z.size() / 2); },
       "no end of central directory record at its end"},
      {"directory_offset_out_of_range", "ab.npz", [](std::string& z, const Layout& l) { put(z, l.end + 16, 4, 0x7fffff00); },
       "does not end where its end record begins"},
      {"directory_size_lies", "ab.npz",
       [](std::string& z, const Layout& l) { put(z, l.end + 12, 4, get(z, l.end + 12, 4) + 46); },
       "does not end where its end record begins"},
      {"too_many_entries", "ab.npz", [](std::string& z, const Layout& l) { put(z, l.end + 8, 2, 400), put(z, l.end + 10, 2, 400); },
       "400 members declared in a"},
      {"multi_disk", "ab.npz", [](std::string& z, const Layout& l) { put(z, l.end + 4, 2, 1); }, "a multi-disk"},
      {"crc_flipped", "ab.npz", [](std::string& z, const Layout& l) { put(z, l.central[1] + 16, 4, get(z, l.central[1] + 16, 4) ^ 1); },
       "member \"bits.npy\": CRC-32 mismatch"},
      {"data_byte_flipped", "ab.npz", [](std::string& z, const Layout& l) { z[l.data[0] + 200] ^= 0x10; },
       "member \"a.npy\": CRC-32 mismatch"},
      {"stored_sizes_past_the_file", "ab.npz",
       [](std::string& z, const Layout& l) { put(z, l.central[4] + 20, 4, 0x7fffffff), put(z, l.central[4] + 24, 4, 0x7fffffff); },
       "member \"block/x.npy\": its 2147483647 compressed bytes at offset"},
      {"stored_sizes_disagree", "ab.npz", [](std::string& z, const Layout& l) { put(z, l.central[0] + 24, 4, 300); },
       "member \"a.npy\": stored, yet its compressed size 256 is not its uncompressed size 300"},
      {"local_offset_out_of_range", "ab.npz", [](std::string& z, const Layout& l) { put(z, l.central[2] + 42, 4, 0x7fff0000); },
       "member \"big.npy\": its local header offset 2147418112 does not lead to a local header"},
      {"local_header_names_another", "ab.npz", [](std::string& z, const Layout& l) { put(z, l.central[1] + 42, 4, 0); },
       "member \"bits.npy\": its local header names another member"},
      {"encrypted", "ab.npz", [](std::string& z, const Layout& l) { put(z, l.central[0] + 8, 2, 1); },
       "member \"a.npy\": encrypted"},
      {"bzip2", "ab_deflate.npz", [](std::string& z, const Layout& l) { put(z, l.central[0] + 10, 2, 12); },
       "member \"a.npy\": compression method 12"},
      {"inflates_short_of_its_size", "ab_deflate.npz", [](std::string& z, const Layout& l) { put(z, l.central[0] + 24, 4, 1000); },
       "member \"a.npy\": inflates to 256 bytes, its entry declares 1000"},
      {"inflates_past_its_size", "ab_deflate.npz", [](std::string& z, const Layout& l) { put(z, l.central[0] + 24, 4, 100); },
       "member \"a.npy\": inflates past the 100 bytes its entry declares"},
      {"deflate_bomb", "ab_deflate.npz", [](std::string& z, const Layout& l) { put(z, l.central[0] + 24, 4, 0xfffffff0); },
       "member \"a.npy\": declares 4294967280 bytes from 185 deflated bytes: more than 1,100-fold"},
      {"compressed_size_short", "ab_deflate.npz", [](std::string& z, const Layout& l) { put(z, l.central[0] + 20, 4, 50); },
       "member \"a.npy\": its deflate stream ends early, after 50 compressed bytes"},
      {"corrupt_deflate", "ab_deflate.npz", [](std::string& z, const Layout& l) { z[l.data[1]] = 0x07; },
       "member \"bits.npy\": corrupt deflate data (invalid block type)"},
  };
  TempDir dir;
  for (const Hostile& c : cases) {
    std::string z = slurp(kNpz / c.fixture);
    ASSERT_FALSE(z.empty()) << c.fixture;
    c.patch(z, layout(z));
    const fs::path p = dir / (std::string(c.label) + ".npz");
    spit(p, z);
    SCOPED_TRACE(c.label);
    expect_refused(compare(p, kNpz / "ab.npz", dir), p, c.why);
  }
}

// The oracle reads operands through open_tensor_file: fixture.h5's eq. (5) operands as uint16
// BF16 bits in one savez_compressed archive give fixture.h5's verdict.
TEST(Npz, OracleExplainReadsOperandsFromAnArchive) {
  TempDir dir;
  const std::string z = (kNpz / "eq5.npz").string();
  const Outcome r = run_psi_in("oracle explain --json --row 0 --col 0 --x " + z + ":x --w " + z + ":w --b " + z +
                                   ":b --y " + z + ":y",
                               dir.path());
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["exact"]["fraction"], "129/2^7");
  EXPECT_EQ(j["correctly_rounded"]["bits"], "0x3f81");
  const auto& read = j["source"]["read"];
  ASSERT_EQ(read.size(), 4u) << read.dump();
  const psi::hdf5::File fixture = psi::hdf5::File::open_read(fs::path(PSI_TEST_DATA) / "oracle" / "fixture.h5");
  const char* names[] = {"x", "w", "b", "y"};
  for (std::size_t i = 0; i < 4; ++i)
    EXPECT_EQ(read[i]["sha256"], fixture.attr_string(std::string("/") + names[i], "sha256_full")) << read[i].dump();
}

}  // namespace
